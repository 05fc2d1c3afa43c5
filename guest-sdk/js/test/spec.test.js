import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DEFAULT_RETRY, KindSpec } from '../src/index.js';

test('the builder fills every field of the WIT record', () => {
  const wit = new KindSpec('scripted')
    .step('first')
    .step('second', 2, { outputSchema: { type: 'object' } })
    .notCancellable()
    .retry(4, 10, 50)
    .failureEffect()
    .notifyOnSuccess()
    .inputSchema('{"type": "object"}')
    .toWit();
  assert.deepEqual(wit, {
    name: 'scripted',
    steps: [
      { key: 'first', weight: 1, outputSchema: undefined },
      { key: 'second', weight: 2, outputSchema: '{"type":"object"}' },
    ],
    cancellable: false,
    retry: { maxAttempts: 4, initialBackoffMs: 10, maxBackoffMs: 50 },
    hasFailureEffect: true,
    notifiesOnSuccess: true,
    inputSchema: '{"type": "object"}',
  });
});

test('defaults: not cancellable, the Rust SDK retry policy, no hooks, no schema', () => {
  const wit = new KindSpec('noop').step('run').toWit();
  assert.equal(wit.cancellable, false);
  assert.deepEqual(wit.retry, { ...DEFAULT_RETRY });
  assert.deepEqual(DEFAULT_RETRY, { maxAttempts: 3, initialBackoffMs: 1000, maxBackoffMs: 60000 });
  assert.equal(wit.hasFailureEffect || wit.notifiesOnSuccess, false);
  assert.equal(wit.inputSchema, undefined);
});

test('a partial retry object keeps the other fields', () => {
  const spec = new KindSpec('k').step('a').retry({ maxAttempts: 7 });
  assert.deepEqual(spec.retryPolicy, { ...DEFAULT_RETRY, maxAttempts: 7 });
});

test('numbers the host cannot read are refused where they are written', () => {
  assert.throws(() => new KindSpec('k').step('a', -1), RangeError);
  assert.throws(() => new KindSpec('k').step('a', 1.5), RangeError);
  assert.throws(() => new KindSpec('k').retry(3, 2 ** 32, 10), RangeError);
  assert.throws(() => new KindSpec('k').step('a').step('a'), /declared twice/);
  assert.throws(() => new KindSpec(''), TypeError);
  assert.deepEqual(new KindSpec('k').step('a').step('b').stepKeys, ['a', 'b']);
});
