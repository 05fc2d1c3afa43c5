// Workflows: the child jobs a step fans out, and what it is called again with.

import { Refused } from './errors.js';
import { jsonBytes, parseJson, toBytes } from './json.js';
import { u32 } from './wit.js';

/** How urgent a child is, as the host's priority layers order it. */
export const Priority = Object.freeze({
  critical: 'critical',
  scheduled: 'scheduled',
  normal: 'normal',
  background: 'background',
});

/**
 * A child job to create: its kind, its input (a JSON value; a Uint8Array is sent as raw
 * bytes) and, optionally, an idempotency key, a priority and lease keys.
 */
export class Child {
  constructor(kind, input, { idempotencyKey, priority, leaseKeys = [] } = {}) {
    if (priority !== undefined && !(priority in Priority)) {
      throw new RangeError(`priority must be one of ${Object.keys(Priority).join(', ')}, got ${String(priority)}`);
    }
    this.kind = String(kind);
    this.input = input;
    this.idempotencyKey = idempotencyKey;
    this.priority = priority;
    this.leaseKeys = [...leaseKeys].map(String);
  }

  /** The WIT `child-spec`; throws what serialising the input throws. */
  toWit() {
    const input = ArrayBuffer.isView(this.input) ? toBytes(this.input) : jsonBytes(this.input);
    return {
      kind: this.kind,
      input,
      idempotencyKey: this.idempotencyKey == null ? undefined : String(this.idempotencyKey),
      priority: this.priority,
      leaseKeys: this.leaseKeys,
    };
  }
}

/**
 * Children to create and when to call the step again: `FanOut.all()` once every child is
 * final, `any()` once the first is, `count(n)` once `n` are. Children still open then are
 * cancelled unless `leftoverKeep()` lets them run on.
 */
export class FanOut {
  constructor(join) {
    this.join = join;
    this.leftover = 'cancel';
    this.cursorText = undefined;
    this.list = [];
  }

  static all() {
    return new FanOut({ tag: 'all' });
  }

  static any() {
    return new FanOut({ tag: 'any' });
  }

  static count(n) {
    return new FanOut({ tag: 'count', val: u32(n, 'count') });
  }

  /** Adds a child (a Child, or its kind, input and options); results come in this order. */
  child(kindOrChild, input, options) {
    this.list.push(kindOrChild instanceof Child ? kindOrChild : new Child(kindOrChild, input, options));
    return this;
  }

  /** Adds children, in order. */
  children(children) {
    for (const child of children) this.child(child);
    return this;
  }

  /** Children still open when the join is met are cancelled (the default). */
  leftoverCancel() {
    this.leftover = 'cancel';
    return this;
  }

  /** Children still open when the join is met run on; the step does not see how they end. */
  leftoverKeep() {
    this.leftover = 'keep';
    return this;
  }

  /** The cursor the step is called again with (`ctx.cursor`). */
  cursor(cursor) {
    this.cursorText = String(cursor);
    return this;
  }

  /** How many children it asks for. */
  get size() {
    return this.list.length;
  }

  /** The WIT `fan-out`; refused `invalid-child-input` if an input does not serialise. */
  toWit() {
    const children = this.list.map((child, index) => {
      try {
        return child.toWit();
      } catch (error) {
        throw new Refused('invalid-child-input', 'a child\'s input is not serialisable as JSON', {
          detail: `child ${index} of kind \`${child.kind}\`: ${error}`,
        });
      }
    });
    return { children, join: this.join, leftover: this.leftover, cursor: this.cursorText };
  }
}

/** One child's result, as its parent's step receives it. */
export class ChildResult {
  /** Wraps the WIT `child-result`. */
  constructor(wit) {
    this.wit = wit;
  }

  get jobId() {
    return this.wit.jobId;
  }

  get kind() {
    return this.wit.kind;
  }

  /** `succeeded`, `failed`, `cancelled`, or undefined while still open (join any/count). */
  get state() {
    return this.wit.state;
  }

  get succeeded() {
    return this.wit.state === 'succeeded';
  }

  get isFinal() {
    return this.wit.state !== undefined;
  }

  /** Its last step's output, raw, when it succeeded. */
  get output() {
    return this.wit.output;
  }

  /** Why it failed or was cancelled: `{ code, message }`. */
  get failure() {
    return this.wit.failure;
  }

  /** The output as JSON, undefined if none; refused `invalid-child-output` if it does not parse or fit. */
  outputJson(check) {
    if (this.wit.output === undefined) return undefined;
    return parseJson(this.wit.output, { code: 'invalid-child-output', what: `the output of child ${this.jobId}`, check });
  }
}

/** The WIT `awaited` variant with its children wrapped: `{ tag, val }`. */
export function awaitedFromWit(awaited) {
  if (awaited === undefined) return undefined;
  if (awaited.tag === 'children') return { tag: 'children', val: awaited.val.map((child) => new ChildResult(child)) };
  return awaited;
}
