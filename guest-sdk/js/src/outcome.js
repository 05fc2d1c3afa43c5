// What a step reports for one call, other than failure (thrown, see errors.js).
//
// An Outcome wraps the WIT `step-outcome` variant in jco's shape (`{ tag, val }`, a
// Uint8Array for `list<u8>`, a BigInt for `u64`), so the glue hands it over unchanged.

import { Refused } from './errors.js';
import { jsonBytes, toBytes } from './json.js';
import { FanOut } from './workflow.js';
import { u32, u64 } from './wit.js';

export class Outcome {
  /** Wraps a WIT `step-outcome`; kinds use the static constructors instead. */
  constructor(wit) {
    this.wit = wit;
  }

  /** The WIT variant's tag: `complete`, `skip`, `retryable`, ... */
  get tag() {
    return this.wit.tag;
  }

  /**
   * The step finished with `value` as JSON (a Uint8Array is sent as raw bytes). A value
   * JSON cannot carry (a BigInt, a cycle) is a bug in the kind: refused `invalid-output`.
   */
  static complete(value) {
    if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return Outcome.completeBytes(value);
    try {
      return new Outcome({ tag: 'complete', val: jsonBytes(value) });
    } catch (error) {
      return Outcome.fromError(new Refused('invalid-output', 'the step\'s output is not serialisable as JSON', { detail: String(error) }));
    }
  }

  /** The step finished with raw bytes (or a string, as UTF-8), not necessarily JSON. */
  static completeBytes(bytes) {
    return new Outcome({ tag: 'complete', val: toBytes(bytes) });
  }

  /** The step does not apply to this job; the reason is shown to operators. */
  static skip(reason) {
    return new Outcome({ tag: 'skip', val: String(reason) });
  }

  /** A transient failure, as a value (throwing `Retryable` does the same). */
  static retryable(code, message = code) {
    return new Outcome({ tag: 'retryable', val: { code, message } });
  }

  /** A permanent failure, as a value (throwing `Refused` does the same). */
  static refused(code, message = code) {
    return new Outcome({ tag: 'refused', val: { code, message } });
  }

  /** Progress saved: the host calls the step again (same attempt) with `cursor`. */
  static more(cursor, done, total) {
    return new Outcome({
      tag: 'more',
      val: { cursor: String(cursor), done: u64(done, 'done'), total: total == null ? undefined : u64(total, 'total') },
    });
  }

  /** Like `more`, with a cursor serialised as JSON (read back with `ctx.cursorJson()`). */
  static moreJson(cursor, done, total) {
    return cursorText(cursor, (text) => Outcome.more(text, done, total));
  }

  /** Call the step again after `seconds`; no attempt is consumed. */
  static snooze(seconds) {
    return new Outcome({ tag: 'snooze', val: u32(seconds, 'seconds') });
  }

  /**
   * Creates the fan-out's children and calls the step again (same attempt, with the
   * fan-out's cursor) once its join is met; `ctx.children` then has their results.
   */
  static awaitChildren(fanOut) {
    if (!(fanOut instanceof FanOut)) throw new TypeError('awaitChildren takes a FanOut');
    try {
      return new Outcome({ tag: 'await-children', val: fanOut.toWit() });
    } catch (error) {
      if (error instanceof Refused) return Outcome.fromError(error);
      throw error;
    }
  }

  /**
   * Parks the step until the signal `name` arrives or `timeoutSecs` pass, then calls it
   * again (same attempt) with the signal's body (`ctx.signal()`) or a timeout.
   */
  static awaitSignal(name, timeoutSecs, { cursor } = {}) {
    return new Outcome({
      tag: 'await-signal',
      val: { name: String(name), timeoutSecs: u32(timeoutSecs, 'timeoutSecs'), cursor: cursor == null ? undefined : String(cursor) },
    });
  }

  /** The outcome a thrown StepError stands for. */
  static fromError(error) {
    return error.retryable ? Outcome.retryable(error.code, error.message) : Outcome.refused(error.code, error.message);
  }

  /**
   * The same outcome called again with `cursor`: for `more` and the awaits. The other
   * outcomes carry no cursor and come back unchanged.
   */
  withCursor(cursor) {
    const { tag, val } = this.wit;
    if (tag === 'more' || tag === 'await-children' || tag === 'await-signal') {
      return new Outcome({ tag, val: { ...val, cursor: String(cursor) } });
    }
    return this;
  }

  /** Like `withCursor`, with a cursor serialised as JSON. */
  withCursorJson(cursor) {
    return cursorText(cursor, (text) => this.withCursor(text));
  }
}

function cursorText(cursor, then) {
  let text;
  let cause = 'undefined has no JSON form';
  try {
    text = JSON.stringify(cursor);
  } catch (error) {
    cause = String(error);
  }
  if (text === undefined) {
    return Outcome.fromError(new Refused('invalid-cursor', 'the step\'s cursor is not serialisable as JSON', { detail: cause }));
  }
  return then(text);
}
