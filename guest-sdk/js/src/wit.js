// Checks for WIT's integer types, so a bad number fails where the kind wrote it rather
// than as a trap in the generated glue.

const U32_MAX = 0xffff_ffff;
const U64_MAX = (1n << 64n) - 1n;

/** `value` as a `u32` (a JS number). */
export function u32(value, what) {
  if (!Number.isInteger(value) || value < 0 || value > U32_MAX) {
    throw new RangeError(`${what} must be an integer from 0 to ${U32_MAX}, got ${String(value)}`);
  }
  return value;
}

/** `value` (a number or BigInt) as a `u64`, which jco carries as a BigInt. */
export function u64(value, what) {
  const big = typeof value === 'bigint' ? value : Number.isInteger(value) ? BigInt(value) : undefined;
  if (big === undefined || big < 0n || big > U64_MAX) {
    throw new RangeError(`${what} must be a non-negative integer below 2^64, got ${String(value)}`);
  }
  return big;
}
