// Types of @spindle/guest/testing: the local runner.

import type {
  Bytes,
  Failure,
  HeartbeatReply,
  Json,
  Kind,
  Leftover,
  LogLevel,
  WitAwaited,
  WitCheckpoint,
  WitChildResult,
  WitChildSpec,
  WitJoin,
  WitResult,
  WitStepOutcome,
} from './index.js';

export declare const LOCAL_JOB_ID: string;
export declare function localChildId(n: number): string;
export declare const MAX_CALLS_PER_STEP: number;

export type ChildOutcomeValue =
  | { state: 'succeeded'; output?: Bytes }
  | { state: 'failed'; failure: Failure }
  | { state: 'cancelled' };

export declare const ChildOutcome: Readonly<{
  succeeded(value?: unknown): ChildOutcomeValue;
  failed(code: string, message?: string): ChildOutcomeValue;
  cancelled(): ChildOutcomeValue;
  fromRun(run: JobRun): ChildOutcomeValue;
}>;

export interface Where {
  step: string;
  attempt: number;
}

export interface Call extends Where {
  cursor: string | undefined;
  awaited: WitAwaited | undefined;
  outcome: WitStepOutcome;
}

export interface ChildRun {
  spec: WitChildSpec;
  result: WitChildResult;
}

export interface FanOutRun extends Where {
  join: WitJoin;
  leftover: Leftover;
  cursor: string | undefined;
  children: ChildRun[];
}

export interface SignalWaitRun extends Where {
  name: string;
  timeoutSecs: number;
  /** Undefined: the wait timed out. */
  body: Bytes | undefined;
}

export interface Signal {
  name: string;
  body: Bytes;
}

/** What happened to a job run by runJob. */
export declare class JobRun<O extends object = Record<string, unknown>> {
  readonly state: 'succeeded' | 'failed';
  readonly succeeded: boolean;
  readonly calls: Call[];
  readonly outputs: Array<{ step: string; output: Bytes }>;
  readonly failure: (Failure & { step: string }) | undefined;
  readonly hook: { name: 'on-failure' | 'on-success'; result: WitResult } | undefined;
  readonly fanOuts: FanOutRun[];
  readonly signalWaits: SignalWaitRun[];
  readonly signalsLeft: Signal[];
  readonly logs: Array<Where & { level: LogLevel; message: string }>;
  readonly stderr: Array<Where & { text: string }>;
  readonly heartbeats: Array<Where & { progress: WitCheckpoint | undefined; reply: HeartbeatReply }>;
  readonly requests: Array<Where & { method: string; url: string }>;
  outputBytes(step: string): Bytes | undefined;
  output<K extends Extract<keyof O, string>>(step: K): O[K] | undefined;
  output(step: string): Json | undefined;
  callsOf(step: string): Call[];
  attemptsOf(step: string): number;
  childrenOf(step: string): ChildRun[];
  signalsConsumed(): Signal[];
}

export interface RunOptions {
  /** Deployment settings, as `config.get` reads them. */
  config?: Record<string, string>;
  /** Tenant secrets: placeholders for `config.secret`, keys for `hmacSha256`, revealed in request headers. */
  secrets?: Record<string, string>;
  /** Answers outbound requests; throw an HttpError to simulate a denial or a timeout. */
  http?: (request: Request) => Response | Promise<Response>;
  /** Settles child jobs (default: each succeeds with its input as its output). */
  children?: (kind: string, input: Bytes, spec: WitChildSpec) => ChildOutcomeValue | Promise<ChildOutcomeValue>;
  /** Queued signals, consumed in order by name; a body that is not bytes or a string is sent as JSON. */
  signals?: Array<{ name: string; body: unknown }>;
  /** The reply to each heartbeat (default `proceed`). */
  heartbeat?: (progress: WitCheckpoint | undefined, where: Where) => HeartbeatReply;
  jobId?: string;
  maxCallsPerStep?: number;
  /** Also print log lines and stderr as they come. */
  echo?: boolean;
}

/** Runs one job: a Uint8Array or string input is the raw payload, anything else is sent as JSON. */
export declare function runJob<I, O extends object>(
  kind: Kind<I, O>,
  input: unknown,
  options?: RunOptions,
): Promise<JobRun<O>>;
