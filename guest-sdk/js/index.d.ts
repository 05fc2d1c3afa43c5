// Types of @spindle/guest. The WIT shapes follow jco's conventions: records as objects
// with camelCase fields, variants as `{ tag, val }`, enums as kebab-case strings,
// `option<T>` as `T | undefined`, `list<u8>` as Uint8Array, `u64` as bigint.

// ---------------------------------------------------------------------------------------
// WIT values (spindle:job/types@0.2.0), as the component's glue passes them.

export type Bytes = Uint8Array;
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
export type HeartbeatReply = 'proceed' | 'stop-cancelled' | 'stop-lease-lost';
export type PriorityName = 'critical' | 'scheduled' | 'normal' | 'background';
export type ChildState = 'succeeded' | 'failed' | 'cancelled';

export interface Failure {
  code: string;
  message: string;
}

export interface WitStepSpec {
  key: string;
  weight: number;
  outputSchema?: string;
}

export interface RetryPolicy {
  /** Attempts in all, the first included (1 to 100). */
  maxAttempts: number;
  /** Delay before the second attempt; it doubles per attempt (at most an hour). */
  initialBackoffMs: number;
  /** Ceiling on the delay between attempts (at most a day). */
  maxBackoffMs: number;
}

export interface WitKindSpec {
  name: string;
  steps: WitStepSpec[];
  cancellable: boolean;
  retry: RetryPolicy;
  hasFailureEffect: boolean;
  notifiesOnSuccess: boolean;
  inputSchema?: string;
}

export interface WitCheckpoint {
  cursor: string;
  done: bigint;
  total?: bigint;
}

export interface WitChildSpec {
  kind: string;
  input: Bytes;
  idempotencyKey?: string;
  priority?: PriorityName;
  leaseKeys: string[];
}

export type WitJoin = { tag: 'all' } | { tag: 'any' } | { tag: 'count'; val: number };
export type Leftover = 'cancel' | 'keep';

export interface WitFanOut {
  children: WitChildSpec[];
  join: WitJoin;
  leftover: Leftover;
  cursor?: string;
}

export interface WitSignalWait {
  name: string;
  timeoutSecs: number;
  cursor?: string;
}

export type WitStepOutcome =
  | { tag: 'complete'; val: Bytes }
  | { tag: 'skip'; val: string }
  | { tag: 'retryable'; val: Failure }
  | { tag: 'refused'; val: Failure }
  | { tag: 'more'; val: WitCheckpoint }
  | { tag: 'snooze'; val: number }
  | { tag: 'await-children'; val: WitFanOut }
  | { tag: 'await-signal'; val: WitSignalWait };

export interface WitChildResult {
  jobId: string;
  kind: string;
  state?: ChildState;
  output?: Bytes;
  failure?: Failure;
}

export type WitAwaited =
  | { tag: 'children'; val: WitChildResult[] }
  | { tag: 'signal'; val: Bytes }
  | { tag: 'signal-timeout' };

export interface PriorOutput {
  step: string;
  output: Bytes;
}

export interface WitStepInput {
  jobId: string;
  step: string;
  attempt: number;
  idempotencyKey: string;
  payload: Bytes;
  prior: PriorOutput[];
  cursor?: string;
  awaited?: WitAwaited;
}

export interface WitJobSummary {
  jobId: string;
  payload: Bytes;
  outputs: PriorOutput[];
  failure?: Failure;
}

export type WitResult = { tag: 'ok'; val: undefined } | { tag: 'err'; val: Failure };

// ---------------------------------------------------------------------------------------
// Checks: how the typed helpers turn parsed JSON into a T.

/** A type guard (false, or throwing, means the value does not fit). */
export type Guard<T> = (value: unknown) => value is T;
/** A schema whose `parse` returns the value or throws (zod and the like). */
export interface Schema<T> {
  parse(value: unknown): T;
}
export type Check<T> = Guard<T> | Schema<T>;

/** Any value JSON can carry. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// ---------------------------------------------------------------------------------------
// JSON Schema: what a kind declares its input (and its steps' outputs) to be.

export type JSONSchemaType = 'string' | 'number' | 'integer' | 'boolean' | 'null' | 'array' | 'object';

/**
 * A JSON Schema (draft 2020-12) as an object: the keywords the host's validator reads,
 * typed where a slip is easy (`type`, `required`, the subschemas); other keywords are
 * allowed, as JSON Schema allows them. Readonly throughout, so an `as const` schema fits.
 */
export interface JSONSchema {
  $schema?: string;
  $id?: string;
  $ref?: string;
  $defs?: { readonly [name: string]: JSONSchema | boolean };
  $comment?: string;
  title?: string;
  description?: string;
  default?: unknown;
  examples?: readonly unknown[];
  type?: JSONSchemaType | readonly JSONSchemaType[];
  enum?: readonly unknown[];
  const?: unknown;
  allOf?: readonly (JSONSchema | boolean)[];
  anyOf?: readonly (JSONSchema | boolean)[];
  oneOf?: readonly (JSONSchema | boolean)[];
  not?: JSONSchema | boolean;
  if?: JSONSchema | boolean;
  then?: JSONSchema | boolean;
  else?: JSONSchema | boolean;
  // Objects.
  properties?: { readonly [name: string]: JSONSchema | boolean };
  required?: readonly string[];
  additionalProperties?: JSONSchema | boolean;
  patternProperties?: { readonly [pattern: string]: JSONSchema | boolean };
  propertyNames?: JSONSchema | boolean;
  minProperties?: number;
  maxProperties?: number;
  // Arrays.
  items?: JSONSchema | boolean;
  prefixItems?: readonly (JSONSchema | boolean)[];
  contains?: JSONSchema | boolean;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  // Strings and numbers.
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  [keyword: string]: unknown;
}

/**
 * The TypeScript type of the values a schema written `as const` accepts, for the common
 * keywords: `type` (one or a list), `const`, `enum`, `anyOf`/`oneOf`, `items`,
 * `properties` with `required` (the others optional). What it does not follow (`$ref`,
 * `allOf`, `not`, a schema not written `as const`) is `unknown`, never a guess. Keys a
 * schema leaves open (`additionalProperties`) are not typed.
 *
 *   const greeting = { type: 'object', required: ['name'], properties: {
 *     name: { type: 'string', minLength: 1 }, shout: { type: 'boolean' } } } as const satisfies JSONSchema;
 *   type Greeting = FromSchema<typeof greeting>;   // { name: string; shout?: boolean }
 *
 * The type holds for a job's input because the host checks every submission against
 * the kind's `inputSchema`; the local runner (`runJob`) does not, so a test that passes
 * another input gets what it passed.
 */
export type FromSchema<S> = S extends true
  ? unknown
  : S extends false
    ? never
    : S extends { readonly const: infer C }
      ? C
      : S extends { readonly enum: readonly (infer E)[] }
        ? E
        : S extends { readonly anyOf: readonly (infer A)[] }
          ? FromSchema<A>
          : S extends { readonly oneOf: readonly (infer A)[] }
            ? FromSchema<A>
            : S extends { readonly type: readonly (infer T)[] }
              ? FromSchemaType<T, S>
              : S extends { readonly type: infer T }
                ? FromSchemaType<T, S>
                : unknown;

type FromSchemaType<T, S> = T extends 'string'
  ? string
  : T extends 'number' | 'integer'
    ? number
    : T extends 'boolean'
      ? boolean
      : T extends 'null'
        ? null
        : T extends 'array'
          ? S extends { readonly items: infer I }
            ? FromSchema<I>[]
            : unknown[]
          : T extends 'object'
            ? FromSchemaObject<S>
            : unknown;

type RequiredKeys<S> = S extends { readonly required: readonly (infer R)[] } ? R : never;

type FromSchemaObject<S> = S extends { readonly properties: infer P }
  ? Flatten<
      { -readonly [K in keyof P as K extends RequiredKeys<S> ? K : never]: FromSchema<P[K]> } & {
        -readonly [K in keyof P as K extends RequiredKeys<S> ? never : K]?: FromSchema<P[K]>;
      }
    >
  : { [key: string]: unknown };

type Flatten<T> = { [K in keyof T]: T[K] } & {};

// ---------------------------------------------------------------------------------------
// The spec builder.

export declare const DEFAULT_RETRY: Readonly<RetryPolicy>;

export interface StepOptions {
  /**
   * JSON Schema (draft 2020-12) of the step's `complete` output, as a plain object or
   * its JSON text (anything else throws a TypeError).
   */
  outputSchema?: string | JSONSchema;
}

/** What a kind declares about itself: name, ordered steps, policies. */
export declare class KindSpec {
  constructor(name: string);
  readonly name: string;
  readonly stepKeys: string[];
  readonly retryPolicy: RetryPolicy;
  readonly isCancellable: boolean;
  readonly hasFailureEffect: boolean;
  readonly notifiesOnSuccess: boolean;
  /** Appends a step; `weight` (default 1) is its share of the job's progress. */
  step(key: string, weight?: number, options?: StepOptions): this;
  /** Whether callers may cancel its jobs (default true). */
  cancellable(cancellable?: boolean): this;
  notCancellable(): this;
  retry(maxAttempts: number, initialBackoffMs: number, maxBackoffMs: number): this;
  retry(policy: Partial<RetryPolicy>): this;
  failureEffect(enabled?: boolean): this;
  notifyOnSuccess(enabled?: boolean): this;
  /**
   * The JSON Schema (draft 2020-12) a job's input must follow, as a plain object or its
   * JSON text (anything else throws a TypeError): the host refuses a submission that
   * breaks it with 422 `invalid-input`, before anything is queued.
   */
  inputSchema(schema: string | JSONSchema): this;
  toWit(): WitKindSpec;
}

// ---------------------------------------------------------------------------------------
// Outcomes and failures.

/** A step's report for one call, other than a thrown failure. */
export declare class Outcome {
  constructor(wit: WitStepOutcome);
  readonly wit: WitStepOutcome;
  readonly tag: WitStepOutcome['tag'];
  /** Finished with `value` as JSON (a Uint8Array: raw bytes); unserialisable: refused `invalid-output`. */
  static complete(value: unknown): Outcome;
  static completeBytes(bytes: Bytes | ArrayBufferView | ArrayBuffer | string): Outcome;
  static skip(reason: string): Outcome;
  static retryable(code: string, message?: string): Outcome;
  static refused(code: string, message?: string): Outcome;
  static more(cursor: string, done: number | bigint, total?: number | bigint): Outcome;
  static moreJson(cursor: unknown, done: number | bigint, total?: number | bigint): Outcome;
  static snooze(seconds: number): Outcome;
  static awaitChildren(fanOut: FanOut): Outcome;
  static awaitSignal(name: string, timeoutSecs: number, options?: { cursor?: string }): Outcome;
  static fromError(error: StepError): Outcome;
  withCursor(cursor: string): Outcome;
  withCursorJson(cursor: unknown): Outcome;
}

export interface StepErrorOptions {
  /** Log-only detail (an upstream error, an id): never in the job's record. */
  detail?: string;
  cause?: unknown;
}

/** A failed step or hook. `code` and `message` are shown to tenants: no secrets. */
export declare class StepError extends Error {
  constructor(retryable: boolean, code: string, message?: string, options?: StepErrorOptions);
  readonly retryable: boolean;
  readonly code: string;
  readonly detail: string | undefined;
  toFailure(): Failure;
}
/** Transient: the host retries while the budget lasts. */
export declare class Retryable extends StepError {
  constructor(code: string, message?: string, options?: StepErrorOptions);
}
/** Permanent: the step and the job fail. */
export declare class Refused extends StepError {
  constructor(code: string, message?: string, options?: StepErrorOptions);
}
/** Input that does not parse or fit: refused `invalid-input` (or the given code). */
export declare class InvalidInput extends Refused {
  constructor(message?: string, options?: StepErrorOptions & { code?: string });
}
/** A heartbeat said stop; escaping a step it reports retryable `stopped`. */
export declare class Stopped extends Error {
  readonly reply: HeartbeatReply;
}
export declare class Cancelled extends Stopped {
  constructor();
}
export declare class LeaseLost extends Stopped {
  constructor();
}

// ---------------------------------------------------------------------------------------
// Workflows.

export declare const Priority: Readonly<{ [P in PriorityName]: P }>;

export interface ChildOptions {
  /** Among the tenant's jobs: a child whose key is taken is that job, not a new one. */
  idempotencyKey?: string;
  priority?: PriorityName;
  leaseKeys?: Iterable<string>;
}

/** A child job to create; its input is JSON (a Uint8Array: raw bytes). */
export declare class Child {
  constructor(kind: string, input: unknown, options?: ChildOptions);
  readonly kind: string;
  toWit(): WitChildSpec;
}

/** Children to create and when to call the step again. */
export declare class FanOut {
  static all(): FanOut;
  static any(): FanOut;
  static count(n: number): FanOut;
  child(child: Child): this;
  child(kind: string, input: unknown, options?: ChildOptions): this;
  children(children: Iterable<Child>): this;
  leftoverCancel(): this;
  leftoverKeep(): this;
  cursor(cursor: string): this;
  readonly size: number;
  toWit(): WitFanOut;
}

/** One child's result, as its parent's step receives it. */
export declare class ChildResult {
  constructor(wit: WitChildResult);
  readonly wit: WitChildResult;
  readonly jobId: string;
  readonly kind: string;
  /** Undefined while the child is still open (join any or count). */
  readonly state: ChildState | undefined;
  readonly succeeded: boolean;
  readonly isFinal: boolean;
  readonly output: Bytes | undefined;
  readonly failure: Failure | undefined;
  /** The output as JSON; refused `invalid-child-output` if it does not parse or fit. */
  outputJson<T = Json>(check?: Check<T>): T | undefined;
}

export type Awaited =
  | { tag: 'children'; val: ChildResult[] }
  | { tag: 'signal'; val: Bytes }
  | { tag: 'signal-timeout' };

// ---------------------------------------------------------------------------------------
// What steps reach: log, config, HTTP.

export interface Log {
  (level: LogLevel, message: string): void;
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface Config {
  /** The deployment's setting (`spindle deploy ... --set NAME=VALUE`). */
  get(name: string): string | undefined;
  /** A placeholder for the tenant's secret, swapped for the value in outbound request headers. */
  secret(name: string): string | undefined;
  /** HMAC-SHA256 of `message` under the secret, without revealing it. */
  hmacSha256(name: string, message: Bytes | string): Bytes | undefined;
}

export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Logs through the host the current call runs against. */
export declare const log: Log;
export declare const config: Config;
/** fetch() through the host; rejects with an HttpError when no response came. */
export declare const fetch: Fetch;

export type HttpErrorReason = 'denied' | 'invalid-request' | 'timeout' | 'connect' | 'too-large' | 'connection-limit' | 'other';

/** Why a request got no response: `denied`/`invalid-request` refused, the rest retryable `upstream-unavailable`. */
export declare class HttpError extends StepError {
  constructor(reason: HttpErrorReason, detail?: string);
  readonly reason: HttpErrorReason;
}

/** The response unless its status is an error: 429/5xx throw Retryable, other 4xx Refused (`upstream-<status>`). */
export declare function errorForStatus(response: Response): Response;
/** The body as JSON; refused `invalid-response` if it does not parse or fit. */
export declare function readJson<T = Json>(response: Response, check?: Check<T>): Promise<T>;

// ---------------------------------------------------------------------------------------
// Steps, hooks and kinds.

export interface Progress {
  cursor?: string;
  done?: number | bigint;
  total?: number | bigint;
}

type Key<O> = Extract<keyof O, string>;

/** What a step function receives. `I` is the job's input type, `O` the outputs by step key. */
export declare class StepContext<I = unknown, O extends object = Record<string, unknown>> {
  constructor(input: WitStepInput, host: unknown, options?: { inputCheck?: Check<I> });
  readonly key: Key<O>;
  readonly jobId: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
  readonly payload: Bytes;
  readonly priors: PriorOutput[];
  readonly cursor: string | undefined;
  readonly awaited: Awaited | undefined;
  readonly children: ChildResult[] | undefined;
  readonly signalBytes: Bytes | undefined;
  readonly signalTimedOut: boolean;
  readonly stopRequested: HeartbeatReply | undefined;
  readonly log: Log;
  readonly config: Config;
  readonly fetch: Fetch;

  /** The input as JSON, checked with the kind's `input` check; throws InvalidInput. */
  input(): I;
  input<T>(check: Check<T>): T;
  priorBytes(step: Key<O>): Bytes | undefined;
  priorOutput(step: Key<O>): Bytes | undefined;
  /** An earlier step's output; refused `missing-prior` or `invalid-prior`. */
  prior<K extends Key<O>>(step: K): O[K];
  prior<T>(step: Key<O>, check: Check<T>): T;
  priorIfAny<K extends Key<O>>(step: K): O[K] | undefined;
  priorIfAny<T>(step: Key<O>, check: Check<T>): T | undefined;
  cursorJson<T = Json>(check?: Check<T>): T | undefined;
  signal<T = Json>(check?: Check<T>): T | undefined;
  heartbeat(progress?: Progress): HeartbeatReply;
  /** Throws Cancelled or LeaseLost on a stop answer. */
  heartbeatOrStop(progress?: Progress): void;
}

/** A settled job, as the hooks receive it. */
export declare class JobSummary<I = unknown, O extends object = Record<string, unknown>> {
  constructor(summary: WitJobSummary, options?: { inputCheck?: Check<I> });
  readonly jobId: string;
  readonly payload: Bytes;
  readonly outputs: PriorOutput[];
  readonly failure: Failure | undefined;
  input(): I;
  input<T>(check: Check<T>): T;
  outputBytes(step: Key<O>): Bytes | undefined;
  output<K extends Key<O>>(step: K): O[K] | undefined;
  output<T>(step: Key<O>, check: Check<T>): T | undefined;
}

type MaybePromise<T> = T | Promise<T>;

/** A step returns an Outcome or the output itself (which completes it). */
export type StepFunction<I, O extends object, K extends Key<O>> = (ctx: StepContext<I, O>) => MaybePromise<O[K] | Outcome>;

export interface StepDefinition<I, O extends object, K extends Key<O>> extends StepOptions {
  run: StepFunction<I, O, K>;
  weight?: number;
}

export type StepList<I, O extends object> = Array<{ [K in Key<O>]: StepDefinition<I, O, K> & { key: K } }[Key<O>]>;

export type Hook<I, O extends object> = (job: JobSummary<I, O>) => MaybePromise<void>;

interface KindOptions<I, O extends object> {
  /** The check `ctx.input()` and `job.input()` apply by default. */
  input?: Check<I>;
  onFailure?: Hook<I, O>;
  onSuccess?: Hook<I, O>;
}

export interface KindDefinition<I, O extends object> extends KindOptions<I, O> {
  name: string;
  /** In order; an object keeps its keys' order (integer-like keys are refused: use a list). */
  steps: { [K in Key<O>]: StepFunction<I, O, K> | StepDefinition<I, O, K> } | StepList<I, O>;
  retry?: Partial<RetryPolicy>;
  cancellable?: boolean;
  /**
   * The JSON Schema (draft 2020-12) a job's input must follow, as a plain object or its
   * JSON text (anything else throws a TypeError): the host refuses a submission that
   * breaks it with 422 `invalid-input`. `FromSchema<typeof schema>` is its input type.
   */
  inputSchema?: string | JSONSchema;
}

export interface KindSpecDefinition<I, O extends object> extends KindOptions<I, O> {
  spec: KindSpec;
  runStep(ctx: StepContext<I, O>): MaybePromise<unknown>;
}

/** A kind: what the component exports as `spindle:job/kind@0.2.0`. */
export interface Kind<I = unknown, O extends object = Record<string, unknown>> {
  readonly name: string;
  readonly spec: KindSpec;
  describe(): WitKindSpec;
  runStep(input: WitStepInput): Promise<WitStepOutcome>;
  onFailure(job: WitJobSummary): Promise<WitResult>;
  onSuccess(job: WitJobSummary): Promise<WitResult>;
  /** Phantom: carries the input and output types to the runner. */
  readonly __types?: { input: I; outputs: O };
}

export declare function defineKind<I = unknown, O extends object = Record<string, unknown>>(
  definition: KindDefinition<I, O> | KindSpecDefinition<I, O>,
): Kind<I, O>;

export declare function isKind(value: unknown): value is Kind;
