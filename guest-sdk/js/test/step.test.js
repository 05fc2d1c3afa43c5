import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Cancelled, InvalidInput, LeaseLost, StepContext } from '../src/index.js';
import { bytes, recordingHost, stepInput } from './helpers.js';

const ctx = (input, host = recordingHost(), options) => new StepContext(stepInput(input), host, options);
const codeOf = (fn) => {
  try {
    fn();
  } catch (error) {
    return error.code;
  }
  return 'no error';
};

test('reads the call\'s identity and input', () => {
  const step = ctx({ step: 'import', attempt: 2, payload: '{"rows": 3}' });
  assert.deepEqual([step.key, step.jobId, step.attempt, step.idempotencyKey], ['import', 'job-1', 2, 'job-1/import']);
  assert.deepEqual(step.input(), { rows: 3 });
  assert.deepEqual([...step.payload], [...bytes('{"rows": 3}')]);
});

test('bad input is refused invalid-input, without quoting it', () => {
  let error;
  try {
    ctx({ payload: '{"card": 4000' }).input();
  } catch (caught) {
    error = caught;
  }
  assert.ok(error instanceof InvalidInput);
  assert.equal(error.code, 'invalid-input');
  assert.equal(error.message, 'the job\'s input is not valid JSON');
  assert.doesNotMatch(error.message, /4000/);
  assert.equal(codeOf(() => ctx({ payload: new Uint8Array([0xff]) }).input()), 'invalid-input');
});

test('a guard or a schema types the input; the kind\'s check is the default', () => {
  const hasRows = (value) => typeof value.rows === 'number';
  assert.equal(codeOf(() => ctx({ payload: '{"rows": "3"}' }).input(hasRows)), 'invalid-input');
  const schema = { parse: (value) => ({ ...value, parsed: true }) };
  assert.deepEqual(ctx({ payload: '{"rows": 3}' }).input(schema), { rows: 3, parsed: true });
  const failing = { parse: () => { throw new Error('rows: expected number'); } };
  assert.equal(codeOf(() => ctx({}).input(failing)), 'invalid-input');
  const withDefault = ctx({ payload: '{}' }, recordingHost(), { inputCheck: hasRows });
  assert.equal(codeOf(() => withDefault.input()), 'invalid-input');
  assert.deepEqual(withDefault.input(() => true), {});
  const own = () => { throw new InvalidInput('`rows` is required'); };
  assert.throws(() => ctx({}).input(own), { message: '`rows` is required' });
});

test('prior outputs: from the input, else from the host; missing and malformed are refused', () => {
  const host = recordingHost({ priors: { capped: '{"big": true}' } });
  const step = ctx({ prior: { validate: '{"rows": 5}', broken: '[' } }, host);
  assert.deepEqual(step.prior('validate'), { rows: 5 });
  assert.deepEqual(step.prior('capped'), { big: true });
  assert.equal(step.priorBytes('capped'), undefined);
  assert.equal(step.priorIfAny('skipped'), undefined);
  assert.equal(codeOf(() => step.prior('skipped')), 'missing-prior');
  assert.equal(codeOf(() => step.prior('broken')), 'invalid-prior');
  assert.equal(codeOf(() => step.prior('validate', (v) => Array.isArray(v))), 'invalid-prior');
  assert.deepEqual(step.priors.map((prior) => prior.step), ['validate', 'broken']);
});

test('the cursor reads as text or JSON', () => {
  assert.equal(ctx({}).cursorJson(), undefined);
  assert.deepEqual(ctx({ cursor: '{"page": 2}' }).cursorJson(), { page: 2 });
  assert.equal(ctx({ cursor: 'x' }).cursor, 'x');
  assert.equal(codeOf(() => ctx({ cursor: 'x' }).cursorJson()), 'invalid-cursor');
});

test('what an await brought back: children, a signal, or its timeout', () => {
  const first = ctx({});
  assert.deepEqual([first.awaited, first.children, first.signal(), first.signalTimedOut], [undefined, undefined, undefined, false]);
  const children = ctx({
    awaited: {
      tag: 'children',
      val: [
        { jobId: 'c1', kind: 'thumb', state: 'succeeded', output: bytes('{"px": 4}') },
        { jobId: 'c2', kind: 'thumb', state: undefined },
        { jobId: 'c3', kind: 'thumb', state: 'failed', failure: { code: 'bad-image', message: 'no' } },
      ],
    },
  }).children;
  assert.deepEqual(children.map((child) => [child.jobId, child.succeeded, child.isFinal]), [['c1', true, true], ['c2', false, false], ['c3', false, true]]);
  assert.deepEqual(children[0].outputJson(), { px: 4 });
  assert.equal(children[1].outputJson(), undefined);
  assert.equal(children[2].failure.code, 'bad-image');
  assert.equal(codeOf(() => children[0].outputJson(Array.isArray)), 'invalid-child-output');
  const signalled = ctx({ awaited: { tag: 'signal', val: bytes('{"carrier": "dhl"}') } });
  assert.deepEqual(signalled.signal(), { carrier: 'dhl' });
  assert.equal(signalled.children, undefined);
  assert.equal(codeOf(() => ctx({ awaited: { tag: 'signal', val: bytes('nope') } }).signal()), 'invalid-signal');
  const timedOut = ctx({ awaited: { tag: 'signal-timeout' } });
  assert.deepEqual([timedOut.signalTimedOut, timedOut.signal()], [true, undefined]);
});

test('heartbeats carry progress as WIT u64s and report stops', () => {
  const host = recordingHost({ replies: ['proceed', 'stop-cancelled', 'stop-lease-lost'] });
  const step = ctx({}, host);
  assert.equal(step.heartbeat({ cursor: '10', done: 10, total: 100 }), 'proceed');
  assert.deepEqual(host.beats[0], { cursor: '10', done: 10n, total: 100n });
  assert.equal(step.stopRequested, undefined);
  assert.throws(() => step.heartbeatOrStop(), Cancelled);
  assert.equal(step.stopRequested, 'stop-cancelled');
  assert.throws(() => step.heartbeatOrStop({ done: 1n }), LeaseLost);
  assert.deepEqual(host.beats.slice(1), [undefined, { cursor: '', done: 1n, total: undefined }]);
  assert.throws(() => step.heartbeat({ done: -1 }), RangeError);
});

test('log, config and fetch go to the call\'s host', async () => {
  const host = recordingHost();
  host.config = { get: (name) => `set:${name}`, secret: (name) => `{{${name}}}`, hmacSha256: (name, message) => message };
  const step = ctx({}, host);
  step.log.info('one');
  step.log('warn', 'two');
  assert.deepEqual(host.lines, [['info', 'one'], ['warn', 'two']]);
  assert.throws(() => step.log('loud', 'x'), RangeError);
  assert.equal(step.config.get('region'), 'set:region');
  assert.equal(step.config.secret('token'), '{{token}}');
  assert.deepEqual([...step.config.hmacSha256('key', 'ab')], [97, 98]);
  assert.equal(await (await step.fetch('https://example.com')).text(), 'ok');
});
