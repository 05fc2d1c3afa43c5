import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  Cancelled, InvalidInput, KindSpec, LeaseLost, Outcome, Refused, Retryable, defineKind, isKind,
} from '../src/index.js';
import { setHostScope } from '../src/host.js';
import { json, recordingHost, stepInput, text } from './helpers.js';

/** Runs one WIT call of `kind` against `host`. */
async function call(kind, input, host = recordingHost()) {
  setHostScope(() => host);
  try {
    return await kind.runStep(stepInput(input));
  } finally {
    setHostScope(() => undefined);
  }
}

const echo = (result) => defineKind({ name: 'echo', steps: { only: () => (typeof result === 'function' ? result() : result) } });

test('steps keep their declared order, weights and schemas, and hooks set the flags', () => {
  const kind = defineKind({
    name: 'ordered',
    steps: { b: () => 1, a: { run: () => 2, weight: 3, outputSchema: { type: 'number' } } },
    retry: { maxAttempts: 5, initialBackoffMs: 1, maxBackoffMs: 2 },
    inputSchema: { type: 'object' },
    cancellable: false,
    onFailure() {},
  });
  const wit = kind.describe();
  assert.deepEqual(wit.steps.map((step) => [step.key, step.weight, step.outputSchema]), [['b', 1, undefined], ['a', 3, '{"type":"number"}']]);
  assert.deepEqual([wit.hasFailureEffect, wit.notifiesOnSuccess, wit.cancellable], [true, false, false]);
  assert.equal(wit.inputSchema, '{"type":"object"}');
  assert.equal(wit.retry.maxAttempts, 5);
  assert.ok(isKind(kind) && !isKind({}));
});

test('defineKind refuses a schema that is not a plain object or JSON text of one', () => {
  const steps = { only: () => 1 };
  for (const inputSchema of [['name'], 'not json', '[]', 42, new Date(0)]) {
    assert.throws(() => defineKind({ name: 'typed', steps, inputSchema }), TypeError, String(inputSchema));
  }
  assert.throws(() => defineKind({ name: 'typed', steps: { only: { run: () => 1, outputSchema: '"x"' } } }), /the output schema of step `only`/);
  const typed = defineKind({ name: 'typed', steps, inputSchema: '{"type":"object","required":["name"]}' });
  assert.equal(typed.describe().inputSchema, '{"type":"object","required":["name"]}');
});

test('a list of steps allows any key; an object refuses integer-like keys', () => {
  const kind = defineKind({ name: 'listed', steps: [{ key: '2', run: () => 1 }, { key: '1', run: () => 2 }] });
  assert.deepEqual(kind.spec.stepKeys, ['2', '1']);
  assert.throws(() => defineKind({ name: 'x', steps: { 2: () => 1 } }), /list the steps/);
  assert.throws(() => defineKind({ name: 'x', steps: {} }), /declares no step/);
  assert.throws(() => defineKind({ name: 'x', steps: { a: 3 } }), /needs a function/);
});

test('a spec with one runStep dispatches every declared key to it', async () => {
  const kind = defineKind({ spec: new KindSpec('raw').step('a').step('b'), runStep: (ctx) => ctx.key });
  assert.equal(text((await call(kind, { step: 'b' })).val), '"b"');
  assert.equal((await call(kind, { step: 'c' })).val.code, 'unknown-step');
});

test('a returned value completes as JSON; bytes go as they are; nothing is null', async () => {
  assert.deepEqual(json((await call(echo({ rows: 3 }), {})).val), { rows: 3 });
  assert.deepEqual([...(await call(echo(new Uint8Array([0, 1])), {})).val], [0, 1]);
  assert.equal(text((await call(echo(undefined), {})).val), 'null');
  assert.deepEqual(await call(echo(Outcome.skip('n/a')), {}), { tag: 'skip', val: 'n/a' });
  const bigint = await call(echo(10n), {});
  assert.deepEqual([bigint.tag, bigint.val.code], ['refused', 'invalid-output']);
});

test('async steps are awaited', async () => {
  const kind = defineKind({ name: 'later', steps: { only: async () => { await new Promise((r) => setTimeout(r, 1)); return 'done'; } } });
  assert.equal(text((await call(kind, {})).val), '"done"');
});

test('an unknown key is refused unknown-step, with the key in the log only', async () => {
  const host = recordingHost();
  const outcome = await call(echo(1), { step: 'other' }, host);
  assert.deepEqual(outcome, { tag: 'refused', val: { code: 'unknown-step', message: 'the kind does not implement this step' } });
  assert.match(host.lines[0][1], /"other"/);
});

test('thrown failures map by type, their detail to the log only', async () => {
  const host = recordingHost();
  const refused = await call(echo(() => { throw new Refused('card-declined', 'declined', { detail: '4000 0000' }); }), {}, host);
  assert.deepEqual(refused, { tag: 'refused', val: { code: 'card-declined', message: 'declined' } });
  assert.deepEqual(host.lines, [['warn', 'step `only` refused card-declined: 4000 0000']]);
  const retryable = await call(echo(() => { throw new Retryable('busy'); }), {});
  assert.deepEqual(retryable, { tag: 'retryable', val: { code: 'busy', message: 'busy' } });
  const invalid = await call(echo(() => { throw new InvalidInput('no name'); }), {});
  assert.deepEqual(invalid, { tag: 'refused', val: { code: 'invalid-input', message: 'no name' } });
});

test('any other exception is retryable uncaught-exception, its stack on stderr', async () => {
  const host = recordingHost();
  const outcome = await call(echo(() => ({}).missing.call()), {}, host);
  assert.equal(outcome.tag, 'retryable');
  assert.equal(outcome.val.code, 'uncaught-exception');
  assert.match(outcome.val.message, /^TypeError: /);
  assert.equal(host.errors.length, 1);
  assert.match(host.errors[0], /^uncaught exception in step `only`: TypeError: [^\n]+\n\s+at /);
  const thrown = await call(echo(() => { throw 'boom'; }), {});
  assert.equal(thrown.val.message, 'String: boom');
  const long = await call(echo(() => { throw new Error('x'.repeat(2000)); }), {});
  assert.equal(long.val.message.length, 512);
});

test('a stop that escapes a step reports retryable stopped', async () => {
  for (const Stop of [Cancelled, LeaseLost]) {
    const outcome = await call(echo(() => { throw new Stop(); }), {});
    assert.deepEqual([outcome.tag, outcome.val.code], ['retryable', 'stopped']);
  }
});

test('hooks return ok, or their failure as err', async () => {
  const summary = { jobId: 'job-1', payload: new TextEncoder().encode('{"n":1}'), outputs: [], failure: undefined };
  const seen = [];
  const kind = defineKind({
    name: 'hooked',
    input: (value) => typeof value.n === 'number',
    steps: { only: () => 1 },
    onFailure: (job) => { seen.push(job.input().n); },
    onSuccess: () => { throw new Refused('mail-bounced', 'the mail bounced'); },
  });
  const host = recordingHost();
  setHostScope(() => host);
  try {
    assert.deepEqual(await kind.onFailure(summary), { tag: 'ok', val: undefined });
    assert.deepEqual(await kind.onSuccess(summary), { tag: 'err', val: { code: 'mail-bounced', message: 'the mail bounced' } });
    assert.deepEqual(seen, [1]);
    assert.match(host.lines[0][1], /^on-success refused mail-bounced/);
    const plain = echo(1);
    assert.deepEqual(await plain.onFailure(summary), { tag: 'ok', val: undefined });
    const crashing = defineKind({ name: 'c', steps: { only: () => 1 }, onSuccess: () => null.x });
    const result = await crashing.onSuccess(summary);
    assert.deepEqual([result.tag, result.val.code], ['err', 'uncaught-exception']);
  } finally {
    setHostScope(() => undefined);
  }
});
