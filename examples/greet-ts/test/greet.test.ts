// The greet kind under the SDK's local runner: the four inputs every language checks.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runJob } from '@spindle/guest/testing';

import { inputSchema, kind } from '../greet.js';
import type { GreetInput } from '../greet.js';

test('a name is composed, then delivered on the first attempt', async () => {
  const run = await runJob(kind, { name: 'Ada' });
  assert.equal(run.state, 'succeeded');
  assert.deepEqual(run.output('compose'), { text: 'Hello, Ada!' });
  assert.deepEqual(run.output('deliver'), { delivered: 'Hello, Ada!', attempt: 1 });
  assert.equal(run.heartbeats.length, 1);
});

test('an input without a name is refused as invalid', async () => {
  for (const input of [{}, { name: '' }, [], 'not json']) {
    const run = await runJob(kind, input);
    assert.equal(run.state, 'failed', JSON.stringify(input));
    assert.equal(run.failure?.code, 'invalid-input');
    assert.equal(run.calls.length, 1, 'a refusal is not retried');
  }
});

test('a flaky delivery succeeds on its second attempt', async () => {
  const run = await runJob(kind, { name: 'Ada', flaky: true });
  assert.equal(run.state, 'succeeded');
  assert.deepEqual(run.output('deliver'), { delivered: 'Hello, Ada!', attempt: 2 });
});

test('an explosion is an uncaught TypeError, retried until the budget is spent', async () => {
  const run = await runJob(kind, { name: 'Ada', explode: true });
  assert.equal(run.state, 'failed');
  assert.equal(run.failure?.code, 'uncaught-exception');
  assert.match(run.failure?.message ?? '', /^TypeError: /);
  assert.equal(run.attemptsOf('compose'), 3);
});

test('the kind declares the schema its input type is derived from', () => {
  const spec = kind.describe();
  assert.deepEqual(JSON.parse(spec.inputSchema ?? 'null'), inputSchema);
  assert.deepEqual(inputSchema.required, ['name']);
});

test('the input type is the schema: tsc (strict) refuses what the host would', () => {
  const ada: GreetInput = { name: 'Ada', flaky: true };
  // @ts-expect-error `name` is required by the schema.
  const nameless: GreetInput = { flaky: true };
  // @ts-expect-error `flaky` is a boolean in the schema.
  const wrong: GreetInput = { name: 'Ada', flaky: 'yes' };
  assert.deepEqual([ada.name, nameless.flaky, wrong.name], ['Ada', true, 'Ada']);
});
