// What the failure and success hooks receive.

import { parseJson } from './json.js';

/** A settled job, as handed to `onFailure` and `onSuccess`. */
export class JobSummary {
  #summary;
  #inputCheck;

  /** Wraps the host's WIT `job-summary`; public so hooks can be unit-tested directly. */
  constructor(summary, { inputCheck } = {}) {
    this.#summary = summary;
    this.#inputCheck = inputCheck;
  }

  /** The job's id; stable, so a hook can use it to be idempotent. */
  get jobId() {
    return this.#summary.jobId;
  }

  /** The job's input as submitted, raw. */
  get payload() {
    return this.#summary.payload;
  }

  /** The job's input as JSON, checked like `ctx.input()` (refused `invalid-input`). */
  input(check = this.#inputCheck) {
    return parseJson(this.#summary.payload, { code: 'invalid-input', what: 'the job\'s input', check });
  }

  /** The outputs of the steps that completed: `[{ step, output }]`. */
  get outputs() {
    return this.#summary.outputs;
  }

  /** The raw output of a step that completed, if it did. */
  outputBytes(step) {
    return this.#summary.outputs.find((output) => output.step === step)?.output;
  }

  /** A completed step's output as JSON, undefined if it did not complete; refused `invalid-prior` if it does not parse or fit. */
  output(step, check) {
    const bytes = this.outputBytes(step);
    if (bytes === undefined) return undefined;
    return parseJson(bytes, { code: 'invalid-prior', what: `the output of step \`${step}\``, check });
  }

  /** Why the job failed (`{ code, message }`); undefined in `onSuccess`. */
  get failure() {
    return this.#summary.failure;
  }
}
