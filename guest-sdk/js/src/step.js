// One call of a step: its input, its helpers, its line to the host.

import { Cancelled, LeaseLost, Refused } from './errors.js';
import { makeConfig } from './config.js';
import { makeFetch } from './http.js';
import { parseJson } from './json.js';
import { makeLog } from './log.js';
import { awaitedFromWit } from './workflow.js';
import { u64 } from './wit.js';

/** What a step function receives (the `ctx`). */
export class StepContext {
  #input;
  #host;
  #inputCheck;
  #awaited;
  #stop;

  /**
   * Wraps the host's WIT `step-input`. Public so a step function can be unit-tested
   * with a hand-built input; `runJob` is the usual way.
   */
  constructor(input, host, { inputCheck } = {}) {
    this.#input = input;
    this.#host = host;
    this.#inputCheck = inputCheck;
    this.#awaited = awaitedFromWit(input.awaited);
    this.#stop = undefined;
    const hostOf = () => this.#host;
    this.log = makeLog(hostOf);
    this.config = makeConfig(hostOf);
    this.fetch = makeFetch(hostOf);
  }

  /** The step's key, one of those the kind declared. */
  get key() {
    return this.#input.step;
  }

  /** The job's id (a UUID in text form). */
  get jobId() {
    return this.#input.jobId;
  }

  /** 1 for the first attempt of this step, 2 for the first retry, ... */
  get attempt() {
    return this.#input.attempt;
  }

  /** Stable across this step's attempts: use it to make side effects idempotent. */
  get idempotencyKey() {
    return this.#input.idempotencyKey;
  }

  /** The job's input as submitted, raw. */
  get payload() {
    return this.#input.payload;
  }

  /**
   * The job's input parsed as JSON and checked with `check` (a type guard or a schema
   * with `parse`), by default the kind's `input` check. Throws InvalidInput (refused
   * `invalid-input`) when it does not parse or fit.
   */
  input(check = this.#inputCheck) {
    return parseJson(this.#input.payload, { code: 'invalid-input', what: 'the job\'s input', check });
  }

  /** The outputs of the steps completed so far, as this call's input carries them. */
  get priors() {
    return this.#input.prior;
  }

  /**
   * The raw output of an earlier step if this call's input carries it. The host may
   * leave large outputs out: `priorOutput` also asks the host for those.
   */
  priorBytes(step) {
    return this.#input.prior.find((prior) => prior.step === step)?.output;
  }

  /** The raw output of an earlier step of this job, from the input or else the host; undefined if it has not completed. */
  priorOutput(step) {
    return this.priorBytes(step) ?? this.#host.priorOutput(step);
  }

  /**
   * An earlier step's output as JSON, or undefined if it has not completed (skipped, or
   * declared later); refused `invalid-prior` if it does not parse or fit `check`.
   */
  priorIfAny(step, check) {
    const bytes = this.priorOutput(step);
    if (bytes === undefined) return undefined;
    return parseJson(bytes, { code: 'invalid-prior', what: `the output of step \`${step}\``, check });
  }

  /** Like `priorIfAny`, but refused `missing-prior` when the step has no output. */
  prior(step, check) {
    const bytes = this.priorOutput(step);
    if (bytes === undefined) throw new Refused('missing-prior', `step \`${step}\` has no output in this job`);
    return parseJson(bytes, { code: 'invalid-prior', what: `the output of step \`${step}\``, check });
  }

  /** The cursor of this attempt's last `more` or await outcome, if any. */
  get cursor() {
    return this.#input.cursor;
  }

  /** The cursor parsed as JSON, undefined if none; refused `invalid-cursor` if it does not parse or fit. */
  cursorJson(check) {
    const cursor = this.#input.cursor;
    if (cursor === undefined) return undefined;
    return parseJson(new TextEncoder().encode(cursor), { code: 'invalid-cursor', what: 'the step\'s cursor', check });
  }

  /**
   * What the step waited for, when this call follows one of its await outcomes:
   * `{ tag: 'children', val: ChildResult[] }`, `{ tag: 'signal', val: Uint8Array }` or
   * `{ tag: 'signal-timeout' }`; undefined on any other call.
   */
  get awaited() {
    return this.#awaited;
  }

  /** The results of the children the step fanned out, in the order it asked for them; undefined if this call follows no fan-out. */
  get children() {
    return this.#awaited?.tag === 'children' ? this.#awaited.val : undefined;
  }

  /** The raw body of the signal the step waited for, if it arrived. */
  get signalBytes() {
    return this.#awaited?.tag === 'signal' ? this.#awaited.val : undefined;
  }

  /** The signal's body as JSON, undefined if this call follows no signal; refused `invalid-signal` if it does not parse or fit. */
  signal(check) {
    const body = this.signalBytes;
    if (body === undefined) return undefined;
    return parseJson(body, { code: 'invalid-signal', what: 'the signal\'s body', check });
  }

  /** Whether this call follows an `awaitSignal` whose timeout passed first. */
  get signalTimedOut() {
    return this.#awaited?.tag === 'signal-timeout';
  }

  /**
   * Tells the host the step is alive (renewing its lease), with optional progress
   * `{ cursor, done, total? }`, and returns its answer: `proceed`, `stop-cancelled` or
   * `stop-lease-lost`. Long steps call it regularly and return when told to stop.
   */
  heartbeat(progress) {
    const checkpoint = progress == null
      ? undefined
      : {
          cursor: String(progress.cursor ?? ''),
          done: u64(progress.done ?? 0, 'done'),
          total: progress.total == null ? undefined : u64(progress.total, 'total'),
        };
    const reply = this.#host.heartbeat(checkpoint);
    if (reply !== 'proceed') this.#stop = reply;
    return reply;
  }

  /** Like `heartbeat`, but throws Cancelled or LeaseLost on a stop answer. */
  heartbeatOrStop(progress) {
    const reply = this.heartbeat(progress);
    if (reply === 'stop-cancelled') throw new Cancelled();
    if (reply === 'stop-lease-lost') throw new LeaseLost();
  }

  /** The stop answer any heartbeat of this call got, if one did. */
  get stopRequested() {
    return this.#stop;
  }
}
