// Runs a kind's jobs under Node, without a host or wasm, for the kind's own tests.
//
// runJob drives the steps the way the host's contract describes: declared order, `more`
// calls again with the cursor, `retryable` retries up to the kind's max attempts (the
// attempt number rising), `refused` or a spent budget fails the job, and the hooks run
// when the spec asks for them. It does not wait: backoff and snoozes are skipped. An
// `await-children` step is called again at once with its children settled by the
// `children` handler (default: each succeeds with its input as its output) as far as the
// join needs; an `await-signal` step gets the first queued signal of that name, or a
// timeout. It checks the kind's logic through the same functions the component exports,
// not the host.
//
// What a step reaches through the host comes from the options, per run: `config`
// settings, `secrets`, an `http` handler, `heartbeat` answers. Runs may go on at once:
// each sees only its own.

import { AsyncLocalStorage } from 'node:async_hooks';
import { createHmac } from 'node:crypto';

import { HttpError } from './http.js';
import { setHostScope } from './host.js';
import { isKind } from './kind.js';
import { jsonBytes, parseJson, toBytes } from './json.js';

const scope = new AsyncLocalStorage();
setHostScope(() => scope.getStore());

/** The job id runJob hands every step unless told another. */
export const LOCAL_JOB_ID = '00000000-0000-7000-8000-000000000000';

/** The id runJob gives the `n`th child job it creates in a run, from 1. */
export function localChildId(n) {
  return `00000000-0000-7000-8001-${n.toString(16).padStart(12, '0')}`;
}

/** Calls of one step (continuations and snoozes included) before runJob gives up on it. */
export const MAX_CALLS_PER_STEP = 100_000;

/** How a child job ended, as a `children` handler says. */
export const ChildOutcome = Object.freeze({
  /** Succeeded with `value` as its last step's JSON output (a Uint8Array: raw bytes; undefined: no output). */
  succeeded(value) {
    if (value === undefined) return { state: 'succeeded', output: undefined };
    return { state: 'succeeded', output: ArrayBuffer.isView(value) ? toBytes(value) : jsonBytes(value) };
  },
  /** Failed with `code` and `message`. */
  failed(code, message = code) {
    return { state: 'failed', failure: { code, message } };
  },
  /** Cancelled (its result carries no failure). */
  cancelled() {
    return { state: 'cancelled' };
  },
  /** How a job run by runJob ended: its failure, or its last step's output. */
  fromRun(run) {
    if (run.failure) return ChildOutcome.failed(run.failure.code, run.failure.message);
    const last = run.calls.at(-1)?.outcome;
    return { state: 'succeeded', output: last?.tag === 'complete' ? last.val : undefined };
  },
});

/** What happened to a job run by runJob. */
export class JobRun {
  constructor() {
    /** `succeeded` or `failed`. */
    this.state = 'succeeded';
    /** Every call: `{ step, attempt, cursor, awaited, outcome }` with the WIT outcome. */
    this.calls = [];
    /** Outputs of the steps that completed, in order: `{ step, output }`. */
    this.outputs = [];
    /** Why the job failed: `{ step, code, message }`. */
    this.failure = undefined;
    /** The hook the spec asked for and what it returned: `{ name, result }`. */
    this.hook = undefined;
    /** Every `await-children`: `{ step, attempt, join, leftover, cursor, children: [{ spec, result }] }`. */
    this.fanOuts = [];
    /** Every `await-signal`: `{ step, attempt, name, timeoutSecs, body }` (body undefined: timed out). */
    this.signalWaits = [];
    /** Queued signals no wait consumed. */
    this.signalsLeft = [];
    /** Log lines: `{ step, attempt, level, message }` (step `on-failure`/`on-success` for hooks). */
    this.logs = [];
    /** What went to stderr (uncaught exceptions' stacks): `{ step, attempt, text }`. */
    this.stderr = [];
    /** Heartbeats: `{ step, attempt, progress, reply }`. */
    this.heartbeats = [];
    /** Outbound requests: `{ step, attempt, method, url }`. */
    this.requests = [];
  }

  get succeeded() {
    return this.state === 'succeeded';
  }

  /** A completed step's raw output, or undefined. */
  outputBytes(step) {
    return this.outputs.find((output) => output.step === step)?.output;
  }

  /** A completed step's output as JSON, or undefined if it did not complete. */
  output(step) {
    const bytes = this.outputBytes(step);
    return bytes === undefined ? undefined : parseJson(bytes, { code: 'invalid-output', what: `the output of step \`${step}\`` });
  }

  /** The calls of one step. */
  callsOf(step) {
    return this.calls.filter((call) => call.step === step);
  }

  /** The attempts one step made (0 if it never ran). */
  attemptsOf(step) {
    return Math.max(0, ...this.callsOf(step).map((call) => call.attempt));
  }

  /** The children one step fanned out, over all its fan-outs, in order. */
  childrenOf(step) {
    return this.fanOuts.filter((fanOut) => fanOut.step === step).flatMap((fanOut) => fanOut.children);
  }

  /** The signals the job consumed, in order: `{ name, body }`. */
  signalsConsumed() {
    return this.signalWaits.filter((wait) => wait.body !== undefined).map(({ name, body }) => ({ name, body }));
  }
}

/**
 * Runs one job of `kind` with `input` to its end: a Uint8Array or a string is the raw
 * payload, anything else is sent as JSON. Options:
 *
 * - `config`: deployment settings, `{ name: value }`
 * - `secrets`: tenant secrets, `{ name: value }`; `config.secret` returns a placeholder the
 *   `http` handler sees replaced in request headers, and `hmacSha256` signs with them
 * - `http(request)`: answers outbound requests with a Response (or throws an HttpError);
 *   without it a fetch fails with HttpError `other`
 * - `children(kind, input, spec)`: settles child jobs with a ChildOutcome
 * - `signals`: `[{ name, body }]` queued for the waits, consumed in order by name
 * - `heartbeat(progress, { step, attempt })`: the reply to a heartbeat (default `proceed`)
 * - `jobId`, `maxCallsPerStep`, and `echo` (also print log lines and stderr)
 */
export async function runJob(kind, input, options = {}) {
  if (!isKind(kind)) throw new TypeError('runJob takes a kind made with defineKind');
  const payload = typeof input === 'string' || ArrayBuffer.isView(input) ? toBytes(input) : jsonBytes(input);
  const jobId = options.jobId ?? LOCAL_JOB_ID;
  const maxCalls = options.maxCallsPerStep ?? MAX_CALLS_PER_STEP;
  const spec = kind.describe();
  const maxAttempts = Math.max(1, spec.retry.maxAttempts);
  const run = new JobRun();
  const signals = (options.signals ?? []).map(({ name, body }) => ({ name, body: signalBytes(body) }));
  const children = new ChildJobs(options.children);
  const priorList = () => run.outputs.map(({ step, output }) => ({ step, output: output.slice() }));

  steps: for (const { key } of spec.steps) {
    let attempt = 1;
    let cursor;
    let awaited;
    for (let calls = 1; ; calls += 1) {
      if (calls > maxCalls) {
        run.failure = { step: key, code: 'call-limit', message: `step \`${key}\` did not settle in ${maxCalls} calls` };
        break steps;
      }
      const stepInput = {
        jobId,
        step: key,
        attempt,
        idempotencyKey: `${jobId}/${key}`,
        payload: payload.slice(),
        prior: priorList(),
        cursor,
        awaited,
      };
      const host = localHost(run, options, { step: key, attempt });
      const outcome = await scope.run(host, () => kind.runStep(stepInput));
      run.calls.push({ step: key, attempt, cursor, awaited, outcome });
      awaited = undefined;
      const { tag, val } = outcome;
      if (tag === 'complete') {
        run.outputs.push({ step: key, output: val });
        continue steps;
      } else if (tag === 'skip') {
        continue steps;
      } else if (tag === 'more') {
        cursor = val.cursor;
      } else if (tag === 'snooze') {
        // Called again at once: the runner does not wait.
      } else if (tag === 'retryable' && attempt < maxAttempts) {
        attempt += 1;
        cursor = undefined;
      } else if (tag === 'retryable' || tag === 'refused') {
        run.failure = { step: key, code: val.code, message: val.message };
        break steps;
      } else if (tag === 'await-children') {
        const settled = await children.fanOut(val);
        awaited = { tag: 'children', val: settled.map((child) => ({ ...child.result })) };
        cursor = val.cursor;
        run.fanOuts.push({ step: key, attempt, join: val.join, leftover: val.leftover, cursor: val.cursor, children: settled });
      } else if (tag === 'await-signal') {
        const at = signals.findIndex((signal) => signal.name === val.name);
        const body = at === -1 ? undefined : signals.splice(at, 1)[0].body;
        awaited = body === undefined ? { tag: 'signal-timeout' } : { tag: 'signal', val: body };
        cursor = val.cursor;
        run.signalWaits.push({ step: key, attempt, name: val.name, timeoutSecs: val.timeoutSecs, body });
      } else {
        throw new Error(`step \`${key}\` reported an unknown outcome \`${tag}\``);
      }
    }
  }
  run.signalsLeft = signals;
  if (run.failure) run.state = 'failed';

  const hookName = run.failure ? (spec.hasFailureEffect ? 'on-failure' : undefined) : spec.notifiesOnSuccess ? 'on-success' : undefined;
  if (hookName) {
    const summary = {
      jobId,
      payload: payload.slice(),
      outputs: priorList(),
      failure: run.failure && { code: run.failure.code, message: run.failure.message },
    };
    const host = localHost(run, options, { step: hookName, attempt: 1 });
    const call = hookName === 'on-failure' ? kind.onFailure : kind.onSuccess;
    run.hook = { name: hookName, result: await scope.run(host, () => call(summary)) };
  }
  return run;
}

function signalBytes(body) {
  return typeof body === 'string' || ArrayBuffer.isView(body) ? toBytes(body) : jsonBytes(body);
}

/** The stand-in host for one call, recording into `run`. */
function localHost(run, options, where) {
  const secrets = options.secrets ?? {};
  const echo = options.echo ? (line) => process.stderr.write(`${line}\n`) : () => {};
  return {
    log(level, message) {
      run.logs.push({ ...where, level, message });
      echo(`[${level}] ${where.step}#${where.attempt}: ${message}`);
    },
    heartbeat(progress) {
      const reply = options.heartbeat?.(progress, where) ?? 'proceed';
      run.heartbeats.push({ ...where, progress, reply });
      return reply;
    },
    // The host has every output even when a step's input was capped.
    priorOutput: (step) => run.outputBytes(step)?.slice(),
    config: {
      get: (name) => options.config?.[name],
      secret: (name) => (Object.hasOwn(secrets, name) ? placeholder(name) : undefined),
      hmacSha256: (name, message) => (Object.hasOwn(secrets, name)
        ? new Uint8Array(createHmac('sha256', secrets[name]).update(message).digest())
        : undefined),
    },
    async fetch(input, init) {
      const request = new Request(input, init);
      run.requests.push({ ...where, method: request.method, url: request.url });
      if (!options.http) throw new HttpError('other', 'no HTTP handler is set for this test (runJob option `http`)');
      const headers = new Headers();
      for (const [name, value] of request.headers) headers.append(name, reveal(value, secrets));
      const response = await options.http(new Request(request, { headers }));
      if (!(response instanceof Response)) throw new TypeError('the `http` handler must return a Response');
      return response;
    },
    stderr(text) {
      run.stderr.push({ ...where, text });
      echo(text);
    },
  };
}

/** Shaped like the host's placeholder, with a fixed tag in place of its random one. */
function placeholder(name) {
  return `{{spindle-secret:${name}:local}}`;
}

function reveal(value, secrets) {
  return Object.entries(secrets).reduce((text, [name, secret]) => text.replaceAll(placeholder(name), secret), value);
}

/**
 * The child jobs of one run: their ids, and what those with an idempotency key ended
 * as, so that a key names one job however often it is asked for.
 */
class ChildJobs {
  constructor(handler) {
    this.handler = handler;
    this.created = 0;
    this.byKey = new Map();
  }

  async fanOut({ children, join, leftover }) {
    const settledCount = join.tag === 'all' ? children.length : join.tag === 'any' ? 1 : join.val;
    const results = [];
    for (const [index, spec] of children.entries()) {
      const known = spec.idempotencyKey === undefined ? undefined : this.byKey.get(spec.idempotencyKey);
      const jobId = known?.jobId ?? localChildId((this.created += 1));
      let outcome = known?.outcome;
      if (outcome === undefined && index < settledCount) outcome = await this.settle(spec);
      // What the job is once the join is met: open ones run on, or are cancelled.
      const afterJoin = outcome === undefined && leftover === 'cancel' ? ChildOutcome.cancelled() : outcome;
      if (spec.idempotencyKey !== undefined) this.byKey.set(spec.idempotencyKey, { jobId, outcome: afterJoin });
      const result = outcome === undefined
        ? { jobId, kind: spec.kind, state: undefined, output: undefined, failure: undefined }
        : { jobId, kind: spec.kind, state: outcome.state, output: outcome.output, failure: outcome.failure };
      results.push({ spec, result });
    }
    return results;
  }

  async settle(spec) {
    if (!this.handler) return { state: 'succeeded', output: spec.input.slice() };
    return this.handler(spec.kind, spec.input.slice(), spec);
  }
}
