// Failures as exceptions: what a step throws decides what the host records.
//
// `code` and `message` reach the job's record, shown to tenants and operators, so they
// stay free of secrets and transient detail; such detail goes in `detail`, which the SDK
// writes to the host log instead.

/** A failed step or hook: retryable (the host retries with backoff) or refused (final). */
export class StepError extends Error {
  constructor(retryable, code, message = code, { detail, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.retryable = retryable;
    this.code = code;
    this.detail = detail;
  }

  /** The WIT `failure` record, without the detail. */
  toFailure() {
    return { code: this.code, message: this.message };
  }
}

/** A transient failure: the host retries while the kind's retry budget lasts. */
export class Retryable extends StepError {
  constructor(code, message = code, options = {}) {
    super(true, code, message, options);
  }
}

/** A permanent failure: the step and the job fail without retry. */
export class Refused extends StepError {
  constructor(code, message = code, options = {}) {
    super(false, code, message, options);
  }
}

/**
 * Input that does not parse or does not fit: refused, since the same bytes fail the same
 * way on every attempt. Code `invalid-input` unless another place is meant (the typed
 * prior, cursor and signal helpers use `invalid-prior`, `invalid-cursor`, `invalid-signal`).
 */
export class InvalidInput extends Refused {
  constructor(message = 'the job\'s input is not valid', { code = 'invalid-input', detail, cause } = {}) {
    super(code, message, { detail, cause });
  }
}

/** Thrown by `heartbeatOrStop` on a stop answer; a step that lets it escape stops. */
export class Stopped extends Error {
  constructor(reply, message) {
    super(message);
    this.name = new.target.name;
    this.reply = reply;
  }
}

/** The job is being cancelled: whatever the step reports, the job settles cancelled. */
export class Cancelled extends Stopped {
  constructor() {
    super('stop-cancelled', 'the job is being cancelled');
  }
}

/** This host lost the job's lease: whatever the step reports is refused. */
export class LeaseLost extends Stopped {
  constructor() {
    super('stop-lease-lost', 'this host no longer holds the job\'s lease');
  }
}

/** The refusal for a key the kind does not implement (describe and the steps disagree). */
export function unknownStep(key) {
  return new Refused('unknown-step', 'the kind does not implement this step', { detail: `step key ${JSON.stringify(key)}` });
}

// Long enough for any engine's error text, short enough for a record.
const MAX_MESSAGE = 512;

/**
 * What an exception escaping `context` (a step or hook) means: `{ retryable, failure }`.
 * Reports it on the way: the detail of a StepError to the log, the whole stack of any
 * other exception to stderr, where the host keeps a failed attempt's last lines.
 */
export function failureOf(error, context, host) {
  if (error instanceof StepError) {
    const disposition = error.retryable ? 'retryable' : 'refused';
    host.log('warn', `${context} ${disposition} ${error.code}: ${error.detail ?? error.message}`);
    return { retryable: error.retryable, failure: error.toFailure() };
  }
  if (error instanceof Stopped) {
    host.log('info', `${context} stopped: ${error.message}`);
    return { retryable: true, failure: { code: 'stopped', message: error.message } };
  }
  const summary = summarise(error);
  host.stderr(`uncaught exception in ${context}: ${stackOf(error, summary)}`);
  return { retryable: true, failure: { code: 'uncaught-exception', message: clip(summary) } };
}

/** `<Type>: <message>`, as a runtime prints an uncaught exception's first line. */
function summarise(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  const type = error === null ? 'null' : (error?.constructor?.name ?? typeof error);
  return `${type}: ${String(error)}`;
}

/** V8's stack starts with the summary; SpiderMonkey's is only the frames. */
function stackOf(error, summary) {
  const stack = typeof error?.stack === 'string' ? error.stack : '';
  if (stack.startsWith(summary)) return stack;
  return stack ? `${summary}\n${stack}` : summary;
}

function clip(text) {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 1)}…`;
}
