// What a kind declares about itself; the host reads it once per deployed version.

import { u32 } from './wit.js';

/**
 * Three attempts, 1 s then 2 s apart (doubling up to a minute): enough to ride out a
 * blip without hiding a persistent fault for long. The Rust SDK's default too.
 */
export const DEFAULT_RETRY = Object.freeze({ maxAttempts: 3, initialBackoffMs: 1_000, maxBackoffMs: 60_000 });

/**
 * The kind-spec builder: name, ordered steps, policies.
 *
 *   new KindSpec('payment-saga').step('authorise').step('capture', 3).retry(4, 10, 200).failureEffect()
 *
 * Not cancellable unless `cancellable()` says so (as in the Rust SDK: a kind says when
 * stopping its jobs midway is safe); no hooks and no input schema unless asked for.
 */
export class KindSpec {
  constructor(name) {
    if (typeof name !== 'string' || name === '') throw new TypeError('a kind needs a name');
    this.name = name;
    this.steps = [];
    this.isCancellable = false;
    this.retryPolicy = { ...DEFAULT_RETRY };
    this.hasFailureEffect = false;
    this.notifiesOnSuccess = false;
    this.inputSchemaText = undefined;
  }

  /**
   * Appends a step. Steps run in declaration order; `weight` is its share of the job's
   * progress relative to the others (0 counts as 1). `outputSchema` is the JSON Schema
   * (text or object) its `complete` output follows.
   */
  step(key, weight = 1, { outputSchema } = {}) {
    if (typeof key !== 'string' || key === '') throw new TypeError('a step needs a key');
    if (this.steps.some((step) => step.key === key)) throw new Error(`step \`${key}\` is declared twice`);
    const weightU32 = u32(weight, `the weight of step \`${key}\``);
    this.steps.push({ key, weight: weightU32, outputSchema: schemaText(outputSchema, `the output schema of step \`${key}\``) });
    return this;
  }

  /** Whether callers may cancel its jobs (default false); long steps then heartbeat. */
  cancellable(cancellable = true) {
    this.isCancellable = Boolean(cancellable);
    return this;
  }

  notCancellable() {
    return this.cancellable(false);
  }

  /**
   * The retry policy: `maxAttempts` in all (1 to 100), backoff from `initialBackoffMs`
   * (at most an hour) doubling up to `maxBackoffMs` (at most a day); the host refuses to
   * deploy a kind outside these bounds (`component.invalid-spec`). Positional, or one
   * object with any of the three (the rest keep their value).
   */
  retry(maxAttempts, initialBackoffMs, maxBackoffMs) {
    const policy = typeof maxAttempts === 'object' && maxAttempts !== null
      ? { ...this.retryPolicy, ...maxAttempts }
      : { maxAttempts, initialBackoffMs, maxBackoffMs };
    this.retryPolicy = {
      maxAttempts: u32(policy.maxAttempts, 'maxAttempts'),
      initialBackoffMs: u32(policy.initialBackoffMs, 'initialBackoffMs'),
      maxBackoffMs: u32(policy.maxBackoffMs, 'maxBackoffMs'),
    };
    return this;
  }

  /** Asks the host to call `onFailure` when a job fails (compensate, refund, release). */
  failureEffect(enabled = true) {
    this.hasFailureEffect = Boolean(enabled);
    return this;
  }

  /** Asks the host to call `onSuccess` after a job succeeds. */
  notifyOnSuccess(enabled = true) {
    this.notifiesOnSuccess = Boolean(enabled);
    return this;
  }

  /**
   * The JSON Schema (draft 2020-12) a job's input must follow, as a plain object or the
   * JSON text of one (anything else throws a TypeError): the host refuses a submission
   * that does not follow it with 422 `invalid-input`, before anything is queued.
   */
  inputSchema(schema) {
    this.inputSchemaText = schemaText(schema, 'the input schema');
    return this;
  }

  /** The declared step keys, in order. */
  get stepKeys() {
    return this.steps.map((step) => step.key);
  }

  /** The WIT `kind-spec` record handed to the host. */
  toWit() {
    return {
      name: this.name,
      steps: this.steps.map((step) => ({ ...step })),
      cancellable: this.isCancellable,
      retry: { ...this.retryPolicy },
      hasFailureEffect: this.hasFailureEffect,
      notifiesOnSuccess: this.notifiesOnSuccess,
      inputSchema: this.inputSchemaText,
    };
  }
}

/**
 * A schema as the WIT record carries it: JSON text of an object. Text is kept as written
 * once it parses to an object; a plain object (a literal, `JSON.parse`'s, a
 * null-prototype one) is serialised. Anything else — an array, a number, a Map, a class
 * instance, text that is not JSON — is a TypeError now rather than a refused deploy.
 */
function schemaText(schema, what) {
  if (schema == null) return undefined;
  if (typeof schema === 'string') {
    let parsed;
    try {
      parsed = JSON.parse(schema);
    } catch (error) {
      throw new TypeError(`${what} is not JSON: ${error.message}`);
    }
    if (!isPlainObject(parsed)) throw new TypeError(`${what} must be a JSON object, not ${describe(parsed)}`);
    return schema;
  }
  if (!isPlainObject(schema)) throw new TypeError(`${what} must be a plain object or JSON text, not ${describe(schema)}`);
  try {
    return JSON.stringify(schema);
  } catch (error) {
    throw new TypeError(`${what} cannot be written as JSON: ${error.message}`);
  }
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `a ${value.constructor?.name ?? 'non-plain'} object`;
  return `a ${typeof value}`;
}
