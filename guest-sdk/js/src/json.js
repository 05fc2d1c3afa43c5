// Bytes and JSON at the WIT boundary, where every payload is a `list<u8>` (a Uint8Array).

import { InvalidInput } from './errors.js';

const encoder = new TextEncoder();
// Fatal: a payload that is not UTF-8 is not JSON, and must be refused rather than patched.
const decoder = new TextDecoder('utf-8', { fatal: true });

/** `value` as bytes: a Uint8Array (or other view) as it is, a string as UTF-8. */
export function toBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (typeof value === 'string') return encoder.encode(value);
  throw new TypeError(`expected bytes or a string, got ${typeof value}`);
}

/**
 * `value` serialised as JSON bytes. `undefined` becomes `null`, as a step that returns
 * nothing completes with no meaningful output. Throws what JSON.stringify throws (a
 * BigInt, a cycle); callers turn that into the right refusal.
 */
export function jsonBytes(value) {
  const text = JSON.stringify(value === undefined ? null : value);
  // A function or symbol at the top level stringifies to undefined: not JSON either.
  if (text === undefined) throw new TypeError(`a ${typeof value} is not serialisable as JSON`);
  return encoder.encode(text);
}

/** UTF-8 text of `bytes`, or undefined when they are not UTF-8. */
export function textOf(bytes) {
  try {
    return decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * Parses `bytes` as JSON and checks it with `check`, refusing with `code` when either
 * fails. The message names `what`, never the value: a payload may carry a card number,
 * and the failure is shown to tenants. The parser's own text goes in the detail (log).
 *
 * `check` is a type guard `(value) => boolean` or a schema with `parse(value)` (zod and
 * the like), whose result is returned.
 */
export function parseJson(bytes, { code, what, check }) {
  const text = textOf(bytes);
  if (text === undefined) throw new InvalidInput(`${what} is not UTF-8 text`, { code });
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InvalidInput(`${what} is not valid JSON`, { code, detail: String(error?.message ?? error) });
  }
  return checkValue(value, { code, what, check });
}

/** Applies a guard or schema to an already parsed value (see parseJson). */
export function checkValue(value, { code, what, check }) {
  if (check === undefined) return value;
  if (typeof check === 'function') {
    let fits;
    try {
      fits = check(value);
    } catch (error) {
      if (error instanceof InvalidInput) throw error;
      throw new InvalidInput(`${what} does not have the expected shape`, { code, detail: describe(error) });
    }
    if (fits === false) throw new InvalidInput(`${what} does not have the expected shape`, { code });
    return value;
  }
  if (check !== null && typeof check.parse === 'function') {
    try {
      return check.parse(value);
    } catch (error) {
      if (error instanceof InvalidInput) throw error;
      throw new InvalidInput(`${what} does not have the expected shape`, { code, detail: describe(error) });
    }
  }
  throw new TypeError('a check is a type guard function or an object with a parse method');
}

function describe(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
