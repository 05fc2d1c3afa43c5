// The greet kind under the SDK's local runner: the four inputs every language checks.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runJob } from '@spindle/guest/testing';

import { inputSchema, kind } from '../greet.js';

test('a name is composed, then delivered on the first attempt', async () => {
  const run = await runJob(kind, { name: 'Ada' });
  assert.equal(run.state, 'succeeded');
  assert.deepEqual(run.output('compose'), { text: 'Hello, Ada!' });
  assert.deepEqual(run.output('deliver'), { delivered: 'Hello, Ada!', attempt: 1 });
  assert.deepEqual(run.logs.map((line) => [line.step, line.level, line.message]), [
    ['compose', 'info', 'composing a greeting for Ada'],
    ['deliver', 'info', 'delivered Hello, Ada! (key 00000000-0000-7000-8000-000000000000/deliver)'],
  ]);
  assert.equal(run.heartbeats.length, 1);
});

test('an input without a name is refused as invalid', async () => {
  for (const input of [{}, { name: '' }, [], 'not json']) {
    const run = await runJob(kind, input);
    assert.equal(run.state, 'failed', JSON.stringify(input));
    assert.equal(run.failure.step, 'compose');
    assert.equal(run.failure.code, 'invalid-input');
    assert.equal(run.calls.length, 1, 'a refusal is not retried');
  }
});

test('a flaky delivery succeeds on its second attempt', async () => {
  const run = await runJob(kind, { name: 'Ada', flaky: true });
  assert.equal(run.state, 'succeeded');
  assert.deepEqual(run.output('deliver'), { delivered: 'Hello, Ada!', attempt: 2 });
  const deliveries = run.callsOf('deliver');
  assert.deepEqual(deliveries.map((call) => [call.attempt, call.outcome.tag]), [[1, 'retryable'], [2, 'complete']]);
  assert.equal(deliveries[0].outcome.val.code, 'upstream-unavailable');
});

test('an explosion is an uncaught TypeError, retried until the budget is spent', async () => {
  const run = await runJob(kind, { name: 'Ada', explode: true });
  assert.equal(run.state, 'failed');
  assert.equal(run.failure.step, 'compose');
  assert.equal(run.failure.code, 'uncaught-exception');
  assert.match(run.failure.message, /^TypeError: /);
  assert.equal(run.attemptsOf('compose'), 3);
  assert.equal(run.stderr.length, 3, 'each attempt prints its stack');
  assert.match(run.stderr[0].text, /TypeError[\s\S]*at compose /, "the stack names the step function");
});

test('the kind declares its input schema: a non-empty name, two optional flags', () => {
  const spec = kind.describe();
  assert.deepEqual(JSON.parse(spec.inputSchema), inputSchema);
  assert.equal(inputSchema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.deepEqual(inputSchema.required, ['name']);
  assert.deepEqual(inputSchema.properties.name, { type: 'string', minLength: 1, description: 'who to greet' });
  assert.deepEqual([inputSchema.properties.flaky.type, inputSchema.properties.explode.type], ['boolean', 'boolean']);
  assert.equal(inputSchema.additionalProperties, undefined, 'other keys are allowed');
  assert.deepEqual(JSON.parse(spec.steps[0].outputSchema).required, ['text']);
  assert.equal(spec.steps[1].outputSchema, undefined);
});
