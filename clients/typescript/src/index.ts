/**
 * A typed client of Spindle's HTTP API. Every body and query type comes from `schema.ts`,
 * which openapi-typescript generates from the server's OpenAPI document (the test command
 * regenerates it and fails when it differs), so the client cannot drift from the server.
 */

import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];
export type JobView = Schemas["JobView"];
export type JobPage = Schemas["JobPage"];
export type JobSummaryView = Schemas["JobSummaryView"];
export type LogLineView = Schemas["LogLineView"];
export type LogPage = Schemas["LogPage"];
export type HistoryEntryView = Schemas["HistoryEntryView"];
export type JobLive = Schemas["JobLive"];
export type Submit = Schemas["Submit"];
export type ViolationView = Schemas["ViolationView"];
export type SubmissionView = Schemas["SubmissionView"];
/** The codes the API answers (a newer host may answer others). */
export type ErrorCode = Schemas["ErrorDetail"]["code"];
/** What `list` filters by: the query `GET /v1/jobs` takes. */
export type ListQuery = NonNullable<operations["list_jobs"]["parameters"]["query"]>;
export type { components, operations, paths } from "./schema.js";

/** Every error this client throws. */
export class SpindleError extends Error {
  override name = "SpindleError";
}

/** The host could not be reached, or the connection failed mid-answer. */
export class TransportError extends SpindleError {
  override name = "TransportError";
}

/** The host answered something this client cannot decode. */
export class UnexpectedAnswer extends SpindleError {
  override name = "UnexpectedAnswer";
  constructor(readonly status: number, detail: string) {
    super(`the host's answer (${status}) is not what this client expects: ${detail}`);
  }
}

/** An error the host answered: `{"error": {code, message, reason?, state?, index?, violations?}}`. */
export class Refused extends SpindleError {
  override name = "Refused";
  readonly status: number;
  /** The stable code to branch on. */
  readonly code: ErrorCode | (string & {});
  readonly reason: string | undefined;
  readonly state: string | undefined;
  readonly index: number | undefined;
  readonly violations: ViolationView[];
  /** Seconds the host asked to wait before trying again (`Retry-After`). */
  readonly retryAfter: number | undefined;

  constructor(status: number, detail: Schemas["ErrorDetail"], retryAfter: number | undefined) {
    super(detail.reason ? `${detail.code} (${detail.reason}): ${detail.message}` : `${detail.code}: ${detail.message}`);
    this.status = status;
    this.code = detail.code;
    this.reason = detail.reason ?? undefined;
    this.state = detail.state ?? undefined;
    this.index = detail.index ?? undefined;
    this.violations = detail.violations ?? [];
    this.retryAfter = retryAfter;
  }
}

/**
 * How answers the API promises wrote nothing (429 `quota-exceeded`; 503 `busy`,
 * `contention`, `storage-format`) are tried again: after the host's `Retry-After` when
 * it gave one, else `initialMs` doubled per try, never more than `maxMs` apart.
 */
export interface Retry {
  attempts: number;
  initialMs: number;
  maxMs: number;
}

export const DEFAULT_RETRY: Retry = { attempts: 5, initialMs: 200, maxMs: 30_000 };
export const NEVER: Retry = { attempts: 1, initialMs: 0, maxMs: 0 };

/** Milliseconds to wait before try `attempt + 1`; `undefined`: do not try again. */
export function retryDelay(retry: Retry, attempt: number, status: number, retryAfterSecs?: number): number | undefined {
  if ((status !== 429 && status !== 503) || attempt >= retry.attempts) {
    return undefined;
  }
  const backoff = retry.initialMs * 2 ** Math.min(attempt - 1, 16);
  return Math.min(retryAfterSecs !== undefined ? retryAfterSecs * 1000 : backoff, retry.maxMs);
}

export interface SubmitOptions {
  /** One job per key: a second submission with it (HTTP or `spindle.submit`) answers the first job. */
  idempotencyKey?: string;
  /** The W3C `traceparent` of the caller's span. */
  traceparent?: string;
  priority?: Submit["priority"];
  /** Run no earlier than this RFC 3339 time. */
  runAt?: string;
  /** Run no earlier than this many seconds from now. */
  delaySecs?: number;
  /** Exclusive lease keys: jobs sharing one never run at once. */
  leaseKeys?: string[];
}

export interface Submitted {
  job: JobView;
  /** Whether this call made it (false: its idempotency key named a job made before). */
  created: boolean;
}

/** One of a job's live events. */
export type JobEvent = { type: "history"; entry: HistoryEntryView } | { type: "job"; live: JobLive };

export interface ClientOptions {
  retry?: Retry;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

const FINAL = new Set(["succeeded", "failed", "cancelled"]);
/** Longest a host holds one `wait` request. */
const LONGEST_HELD_WAIT_SECS = 300;

/** A path segment, with what would end or split it escaped. */
const segment = (text: string): string => encodeURIComponent(text);

/** A client of one host, presenting one token. */
export class SpindleClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly retry: Retry;
  private readonly fetch: typeof fetch;

  constructor(baseUrl: string, token?: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Submits a job of `kind` with `input`. */
  async submit(kind: string, input: unknown = {}, options: SubmitOptions = {}): Promise<Submitted> {
    const body: Submit = { kind, input, lease_keys: options.leaseKeys ?? [] };
    if (options.idempotencyKey !== undefined) body.idempotency_key = options.idempotencyKey;
    if (options.priority !== undefined) body.priority = options.priority;
    if (options.runAt !== undefined) body.run_at = options.runAt;
    if (options.delaySecs !== undefined) body.delay_secs = options.delaySecs;
    const headers: Record<string, string> = options.traceparent ? { traceparent: options.traceparent } : {};
    const response = await this.send("POST", "/v1/jobs", { body, headers });
    return { job: (await decode(response)) as JobView, created: response.status === 201 };
  }

  /** The job, with its steps and history. */
  async job(id: string): Promise<JobView> {
    return (await this.json("GET", `/v1/jobs/${segment(id)}`)) as JobView;
  }

  /**
   * A submission `spindle.submit` made: queued, waiting, admitted (with its job) or refused
   * (with its code). Every job call also takes its id in place of the job's.
   */
  async submission(id: string): Promise<SubmissionView> {
    return (await this.json("GET", `/v1/submissions/${segment(id)}`)) as SubmissionView;
  }

  /** The job once it is final, or as it is when `timeoutSecs` have passed. */
  async wait(id: string, timeoutSecs = 60): Promise<JobView> {
    const deadline = Date.now() + timeoutSecs * 1000;
    for (;;) {
      const left = Math.min(Math.max(deadline - Date.now(), 0) / 1000, LONGEST_HELD_WAIT_SECS);
      const job = (await this.json("GET", `/v1/jobs/${segment(id)}/wait?timeout=${left}`)) as JobView;
      if (FINAL.has(job.state) || Date.now() >= deadline) {
        return job;
      }
    }
  }

  /** Sends the signal `name` with a JSON body; one delivery per idempotency key. */
  async signal(id: string, name: string, body: unknown = null, options: { idempotencyKey?: string } = {}): Promise<JobView> {
    const headers: Record<string, string> = options.idempotencyKey ? { "idempotency-key": options.idempotencyKey } : {};
    const response = await this.send("POST", `/v1/jobs/${segment(id)}/signals/${segment(name)}`, { body, headers });
    return (await decode(response)) as JobView;
  }

  /** Cancels the job, saying why; a running step is asked to stop. */
  async cancel(id: string, reason: string): Promise<JobView> {
    return (await this.json("POST", `/v1/jobs/${segment(id)}/cancel`, { reason })) as JobView;
  }

  /** A page of the tenant's jobs, newest first; pass `next_cursor` on as `cursor`. */
  async list(query: ListQuery = {}): Promise<JobPage> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null) params.set(key, String(value));
    }
    const text = params.toString();
    return (await this.json("GET", `/v1/jobs${text ? `?${text}` : ""}`)) as JobPage;
  }

  /** The job's log lines so far (only `step`'s, when given). */
  async logs(id: string, step?: string): Promise<LogPage> {
    return (await this.json("GET", logPath(id, step, false))) as LogPage;
  }

  /** Each log line as it is written, from the first, until the job is final. */
  async *followLogs(id: string, step?: string): AsyncGenerator<LogLineView> {
    for await (const [name, data] of this.stream(logPath(id, step, true))) {
      if (name === "end") return;
      if (name === "line") yield JSON.parse(data) as LogLineView;
    }
  }

  /** The job's events as they happen, from its first history entry, until it is final. */
  async *events(id: string): AsyncGenerator<JobEvent> {
    for await (const [name, data] of this.stream(`/v1/jobs/${segment(id)}/events`)) {
      if (name === "end") return;
      if (name === "history") yield { type: "history", entry: JSON.parse(data) as HistoryEntryView };
      if (name === "job") yield { type: "job", live: JSON.parse(data) as JobLive };
    }
  }

  /** Any other call of the API (`path` from `/v1/…`), with a JSON body when given. */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await this.json(method, path, body)) as T;
  }

  private async json(method: string, path: string, body?: unknown): Promise<unknown> {
    return decode(await this.send(method, path, body === undefined ? {} : { body }));
  }

  /** Sends a request, again while the host answers 429 or 503 and the retry allows. */
  private async send(
    method: string,
    path: string,
    options: { body?: unknown; headers?: Record<string, string>; stream?: boolean },
  ): Promise<Response> {
    const headers: Record<string, string> = { ...options.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    if (options.stream) headers.accept = "text/event-stream";
    const init: RequestInit = { method, headers };
    if (options.body !== undefined) init.body = JSON.stringify(options.body);
    for (let attempt = 1; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetch(`${this.baseUrl}${path}`, init);
      } catch (error) {
        throw new TransportError(`cannot reach the host at ${this.baseUrl}: ${String(error)}`);
      }
      if (response.ok) return response;
      const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
      const failure = await refusal(response, retryAfter);
      const delay = retryDelay(this.retry, attempt, response.status, retryAfter);
      if (delay === undefined) throw failure;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  /** Server-sent events as `[name, data]`: `event:` names one, `data:` lines carry it, a blank line ends it. */
  private async *stream(path: string): AsyncGenerator<[string, string]> {
    const response = await this.send("GET", path, { stream: true });
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    let name = "";
    let data: string[] = [];
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, end).replace(/\r$/, "");
          buffer = buffer.slice(end + 1);
          if (line === "") {
            if (name || data.length) yield [name || "message", data.join("\n")];
            name = "";
            data = [];
          } else if (line.startsWith("event:")) {
            name = line.slice(6).trimStart();
          } else if (line.startsWith("data:")) {
            const value = line.slice(5);
            data.push(value.startsWith(" ") ? value.slice(1) : value);
          }
        }
      }
    } catch (error) {
      throw new TransportError(`the host's events broke off: ${String(error)}`);
    }
  }
}

function logPath(id: string, step: string | undefined, follow: boolean): string {
  const params = new URLSearchParams({ follow: String(follow) });
  if (step !== undefined) params.set("step", step);
  return `/v1/jobs/${segment(id)}/logs?${params.toString()}`;
}

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || !/^\s*\d+\s*$/.test(value)) return undefined;
  return Number(value.trim());
}

async function decode(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UnexpectedAnswer(response.status, String(error));
  }
}

/** The error an unsuccessful answer stands for. */
async function refusal(response: Response, retryAfter: number | undefined): Promise<SpindleError> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as Schemas["ErrorBody"];
    if (body && typeof body.error?.code === "string") {
      return new Refused(response.status, body.error, retryAfter);
    }
  } catch {
    // Not the API's error body: a proxy's, say.
  }
  return new UnexpectedAnswer(response.status, text.slice(0, 200));
}
