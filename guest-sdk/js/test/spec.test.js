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

test('a schema is a plain object or the JSON text of one', () => {
  const greet = { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1 } } };
  assert.equal(new KindSpec('k').inputSchema(greet).toWit().inputSchema, JSON.stringify(greet));
  assert.equal(new KindSpec('k').inputSchema(Object.assign(Object.create(null), { type: 'object' })).toWit().inputSchema, '{"type":"object"}');
  assert.equal(new KindSpec('k').inputSchema(' {"type": "object"} ').toWit().inputSchema, ' {"type": "object"} ', 'text as written');
  assert.equal(new KindSpec('k').inputSchema(undefined).toWit().inputSchema, undefined);
  assert.equal(new KindSpec('k').inputSchema(null).toWit().inputSchema, undefined);
});

test('anything else is a TypeError where it is declared, naming the schema', () => {
  const cyclic = { type: 'object' };
  cyclic.self = cyclic;
  class Schema {
    type = 'object';
  }
  for (const [schema, message] of [
    [[{ type: 'string' }], /the input schema must be a plain object or JSON text, not an array/],
    [true, /not a boolean/],
    [7, /not a number/],
    [new Map([['type', 'object']]), /not a Map object/],
    [new Schema(), /not a Schema object/],
    ['[1, 2]', /the input schema must be a JSON object, not an array/],
    ['"object"', /must be a JSON object, not a string/],
    ['null', /must be a JSON object, not null/],
    ['{"type": ', /the input schema is not JSON/],
    [{ default: 1n }, /cannot be written as JSON/],
    [cyclic, /cannot be written as JSON/],
  ]) {
    assert.throws(() => new KindSpec('k').inputSchema(schema), (error) => error instanceof TypeError && message.test(error.message), String(schema));
  }
  assert.throws(() => new KindSpec('k').step('a', 1, { outputSchema: '[]' }), /the output schema of step `a` must be a JSON object/);
  assert.throws(() => new KindSpec('k').step('a', 1, { outputSchema: 'string' }), TypeError);
});
