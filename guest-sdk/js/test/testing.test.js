import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FanOut, HttpError, Outcome, Retryable, config, defineKind, errorForStatus, log } from '../src/index.js';
import { ChildOutcome, LOCAL_JOB_ID, localChildId, runJob } from '../src/testing.js';
import { json, text } from './helpers.js';

test('more calls again with the cursor; snoozes are not waited for', async () => {
  let snoozes = 0;
  const kind = defineKind({
    name: 'pages',
    steps: {
      read(ctx) {
        const page = ctx.cursorJson() ?? 0;
        if (page === 1 && snoozes++ === 0) return Outcome.snooze(3600).withCursor('ignored');
        return page < 3 ? Outcome.moreJson(page + 1, page + 1, 3) : { pages: page };
      },
    },
  });
  const run = await runJob(kind, {});
  assert.ok(run.succeeded);
  assert.deepEqual(run.output('read'), { pages: 3 });
  assert.deepEqual(run.calls.map((call) => [call.attempt, call.cursor, call.outcome.tag]), [
    [1, undefined, 'more'], [1, '1', 'snooze'], [1, '1', 'more'], [1, '2', 'more'], [1, '3', 'complete'],
  ]);
});

test('retries until the budget is spent, then fails with the last failure', async () => {
  const flaky = (succeedOn) => defineKind({
    name: 'flaky',
    retry: { maxAttempts: 3, initialBackoffMs: 10, maxBackoffMs: 10 },
    steps: {
      call(ctx) {
        if (ctx.attempt < succeedOn) throw new Retryable('upstream-unavailable', 'try again');
        return ctx.attempt;
      },
      after: () => 'after',
    },
  });
  const ok = await runJob(flaky(3), {});
  assert.deepEqual([ok.state, ok.output('call'), ok.attemptsOf('call'), ok.output('after')], ['succeeded', 3, 3, 'after']);
  const spent = await runJob(flaky(4), {});
  assert.deepEqual(spent.failure, { step: 'call', code: 'upstream-unavailable', message: 'try again' });
  assert.deepEqual([spent.state, spent.calls.length, spent.attemptsOf('after')], ['failed', 3, 0]);
});

test('a skipped step has no output and the job goes on', async () => {
  const kind = defineKind({ name: 's', steps: { a: () => Outcome.skip('n/a'), b: (ctx) => ctx.priorIfAny('a') ?? 'none' } });
  const run = await runJob(kind, {});
  assert.deepEqual([run.outputBytes('a'), run.output('b')], [undefined, 'none']);
});

test('inputs: JSON values, raw strings and bytes', async () => {
  const kind = defineKind({ name: 'raw', steps: { only: (ctx) => Outcome.completeBytes(ctx.payload) } });
  assert.equal(text((await runJob(kind, { a: 1 })).outputBytes('only')), '{"a":1}');
  assert.equal(text((await runJob(kind, 'not json')).outputBytes('only')), 'not json');
  assert.deepEqual([...(await runJob(kind, new Uint8Array([7]))).outputBytes('only')], [7]);
});

test('hooks run when the spec asks, with the job\'s summary', async () => {
  const seen = [];
  const kind = defineKind({
    name: 'saga',
    steps: { hold: () => ({ hold: 'h1' }), charge: (ctx) => (ctx.input().fail ? Outcome.refused('card-declined', 'declined') : 'paid') },
    onFailure(job) {
      seen.push(['failure', job.jobId, job.output('hold').hold, job.failure.code, job.input().fail]);
      log.info('released');
    },
    onSuccess(job) {
      seen.push(['success', job.output('charge')]);
      throw new Retryable('mail-down');
    },
  });
  const failed = await runJob(kind, { fail: true });
  assert.deepEqual(failed.hook, { name: 'on-failure', result: { tag: 'ok', val: undefined } });
  assert.deepEqual(failed.logs.at(-1), { step: 'on-failure', attempt: 1, level: 'info', message: 'released' });
  const succeeded = await runJob(kind, { fail: false });
  assert.deepEqual(succeeded.hook, { name: 'on-success', result: { tag: 'err', val: { code: 'mail-down', message: 'mail-down' } } });
  assert.deepEqual(seen, [['failure', LOCAL_JOB_ID, 'h1', 'card-declined', true], ['success', 'paid']]);
  const plain = await runJob(defineKind({ name: 'p', steps: { a: () => 1 } }), {});
  assert.equal(plain.hook, undefined);
});

/** Fans out one child per entry of `kinds` (`passes` times), then reports what it saw. */
const spread = defineKind({
  name: 'spread',
  retry: { maxAttempts: 2, initialBackoffMs: 1, maxBackoffMs: 1 },
  steps: {
    spread(ctx) {
      const plan = ctx.input();
      const pass = ctx.cursorJson() ?? 0;
      const children = ctx.children;
      if (children) {
        if (plan.retryAfterFirstPass && ctx.attempt === 1) throw new Retryable('flaky', 'once');
        if (pass >= (plan.passes ?? 1)) {
          return children.map((child) => ({ id: child.jobId, kind: child.kind, state: child.state ?? null, output: child.outputJson() ?? null, failure: child.failure?.code ?? null }));
        }
      }
      let fanOut = plan.join === 'any' ? FanOut.any() : plan.join ? FanOut.count(plan.join) : FanOut.all();
      if (plan.keep) fanOut = fanOut.leftoverKeep();
      plan.kinds.forEach((kind, index) => fanOut.child(kind, { index }, plan.keyed ? { idempotencyKey: `k${index}` } : {}));
      return Outcome.awaitChildren(fanOut).withCursorJson(pass + 1);
    },
    after: () => 'after',
  },
});

test('children echo their input by default', async () => {
  const run = await runJob(spread, { kinds: ['a', 'b'] });
  assert.ok(run.succeeded, JSON.stringify(run.failure));
  assert.deepEqual(run.output('spread'), [
    { id: localChildId(1), kind: 'a', state: 'succeeded', output: { index: 0 }, failure: null },
    { id: localChildId(2), kind: 'b', state: 'succeeded', output: { index: 1 }, failure: null },
  ]);
  assert.equal(run.output('after'), 'after');
  assert.deepEqual([run.fanOuts.length, run.fanOuts[0].cursor, run.calls[1].cursor, run.calls[1].awaited.val.length], [1, '1', '1', 2]);
});

test('the handler settles children and joins leave the rest open', async () => {
  const children = (kind) => (kind === 'fails' ? ChildOutcome.failed('bad-image', 'no') : kind === 'cancelled' ? ChildOutcome.cancelled() : ChildOutcome.succeeded({ kind }));
  const states = async (plan) => (await runJob(spread, plan, { children })).output('spread').map((child) => child.state);
  assert.deepEqual(await states({ kinds: ['ok', 'fails', 'cancelled'] }), ['succeeded', 'failed', 'cancelled']);
  assert.deepEqual(await states({ kinds: ['fails', 'ok', 'ok'], join: 'any' }), ['failed', null, null]);
  assert.deepEqual(await states({ kinds: ['ok', 'ok', 'ok'], join: 2, keep: true }), ['succeeded', 'succeeded', null]);
  assert.deepEqual(await states({ kinds: ['ok'], join: 5 }), ['succeeded']);
  const all = await runJob(spread, { kinds: ['ok', 'fails'] }, { children });
  assert.deepEqual(all.output('spread').map((child) => [child.output, child.failure]), [[{ kind: 'ok' }, null], [null, 'bad-image']]);
});

test('each pass creates new children unless keyed; a keyed child is settled once', async () => {
  const unkeyed = await runJob(spread, { kinds: ['a', 'b'], passes: 2 });
  assert.deepEqual(unkeyed.childrenOf('spread').map((child) => child.result.jobId), [1, 2, 3, 4].map(localChildId));
  let settled = 0;
  const keyed = await runJob(spread, { kinds: ['a', 'b'], passes: 3, keyed: true }, { children: (kind, input) => { settled += 1; return ChildOutcome.succeeded(input); } });
  const ids = keyed.childrenOf('spread').map((child) => child.result.jobId);
  assert.deepEqual([ids.length, ids.slice(2, 4), ids.slice(4)], [6, ids.slice(0, 2), ids.slice(0, 2)]);
  assert.equal(settled, 2);
});

test('a keyed leftover stays cancelled, or runs on', async () => {
  const states = (run) => run.childrenOf('spread').map((child) => child.result.state);
  assert.deepEqual(states(await runJob(spread, { kinds: ['a', 'b'], join: 'any', keyed: true, passes: 2 })), ['succeeded', undefined, 'succeeded', 'cancelled']);
  assert.deepEqual(states(await runJob(spread, { kinds: ['a', 'b'], join: 'any', keyed: true, keep: true, passes: 2 })), ['succeeded', undefined, 'succeeded', undefined]);
});

test('a retry after an await starts over without cursor or results', async () => {
  const run = await runJob(spread, { kinds: ['a'], retryAfterFirstPass: true });
  assert.ok(run.succeeded);
  assert.deepEqual(run.callsOf('spread').map((call) => [call.attempt, call.cursor, call.awaited !== undefined]), [
    [1, undefined, false], [1, '1', true], [2, undefined, false], [2, '1', true],
  ]);
});

const waiter = defineKind({
  name: 'waiter',
  input: Array.isArray,
  steps: {
    wait(ctx) {
      const names = ctx.input();
      const bodies = ctx.cursorJson() ?? [];
      if (ctx.awaited) bodies.push(ctx.signalTimedOut ? null : ctx.signal());
      return bodies.length < names.length ? Outcome.awaitSignal(names[bodies.length], 60).withCursorJson(bodies) : bodies;
    },
  },
});

test('signals are consumed in order by name, each once', async () => {
  const signals = [{ name: 'shipped', body: { n: 1 } }, { name: 'other', body: 'ignored' }, { name: 'shipped', body: '{"n": 2}' }];
  const run = await runJob(waiter, ['shipped', 'shipped', 'shipped'], { signals });
  assert.deepEqual(run.output('wait'), [{ n: 1 }, { n: 2 }, null]);
  assert.deepEqual(run.signalsConsumed().map(({ name, body }) => [name, json(body)]), [['shipped', { n: 1 }], ['shipped', { n: 2 }]]);
  assert.deepEqual([run.signalWaits.length, run.signalWaits[2].body, run.signalWaits[0].timeoutSecs], [3, undefined, 60]);
  assert.deepEqual(run.signalsLeft.map(({ name, body }) => [name, text(body)]), [['other', 'ignored']]);
  const bad = await runJob(waiter, ['shipped'], { signals: [{ name: 'shipped', body: 'not json' }] });
  assert.equal(bad.failure.code, 'invalid-signal');
});

test('a child can be a local run of another kind', async () => {
  const failed = await runJob(waiter, 'not json');
  assert.deepEqual(ChildOutcome.fromRun(failed).failure.code, 'invalid-input');
  assert.deepEqual(json(ChildOutcome.fromRun(await runJob(waiter, [])).output), []);
  const children = async (kind, input) => (kind === 'waiter' ? ChildOutcome.fromRun(await runJob(waiter, input)) : ChildOutcome.cancelled());
  const run = await runJob(spread, { kinds: ['waiter', 'other'] }, { children });
  assert.deepEqual(run.output('spread').map((child) => child.state), ['failed', 'cancelled']);
});

test('settings, secrets, signatures and HTTP come from the options', async () => {
  const kind = defineKind({
    name: 'caller',
    steps: {
      async call(ctx) {
        const url = ctx.config.get('url');
        const token = config.secret('token');
        assert.doesNotMatch(token, /s3cr3t/);
        const response = errorForStatus(await ctx.fetch(url, { headers: { authorization: `Bearer ${token}` } }));
        const mac = [...ctx.config.hmacSha256('jefe', 'what do ya want for nothing?').slice(0, 4)];
        return { body: await response.text(), mac, missing: [ctx.config.get('nope') ?? null, ctx.config.secret('nope') ?? null] };
      },
    },
  });
  const seen = [];
  const http = (request) => {
    seen.push([request.method, request.url, request.headers.get('authorization')]);
    return new Response('pong');
  };
  const options = { config: { url: 'https://api.example.com/ping' }, secrets: { token: 's3cr3t', jefe: 'Jefe' }, http };
  const run = await runJob(kind, {}, options);
  assert.ok(run.succeeded, JSON.stringify(run.failure));
  assert.deepEqual(run.output('call'), { body: 'pong', mac: [0x5b, 0xdc, 0xc1, 0x46], missing: [null, null] });
  assert.deepEqual(seen, [['GET', 'https://api.example.com/ping', 'Bearer s3cr3t']]);
  assert.deepEqual(run.requests, [{ step: 'call', attempt: 1, method: 'GET', url: 'https://api.example.com/ping' }]);
});

test('HTTP failures map onto outcomes: no handler, a denial, an error status', async () => {
  const kind = defineKind({ name: 'h', retry: { maxAttempts: 1 }, steps: { call: async (ctx) => errorForStatus(await ctx.fetch('https://x.example.com/')).status } });
  const failure = async (options) => (await runJob(kind, {}, options)).failure;
  assert.deepEqual(await failure({}), { step: 'call', code: 'upstream-unavailable', message: 'the upstream service did not answer' });
  assert.equal((await failure({ http: () => { throw new HttpError('denied'); } })).code, 'http-request-denied');
  assert.equal((await failure({ http: () => new Response('', { status: 503 }) })).code, 'upstream-503');
  assert.equal((await failure({ http: () => new Response('', { status: 404 }) })).code, 'upstream-404');
});

test('a heartbeat answer can stop a step', async () => {
  const kind = defineKind({ name: 'long', retry: { maxAttempts: 1 }, steps: { work(ctx) { ctx.heartbeatOrStop({ done: 1, total: 2 }); return 'done'; } } });
  const cancelled = await runJob(kind, {}, { heartbeat: () => 'stop-cancelled' });
  assert.equal(cancelled.failure.code, 'stopped');
  assert.deepEqual(cancelled.heartbeats, [{ step: 'work', attempt: 1, progress: { cursor: '', done: 1n, total: 2n }, reply: 'stop-cancelled' }]);
  assert.ok((await runJob(kind, {})).succeeded);
});

test('uncaught exceptions are recorded with their stack', async () => {
  const kind = defineKind({ name: 'x', retry: { maxAttempts: 2 }, steps: { boom: () => JSON.parse('{') } });
  const run = await runJob(kind, {});
  assert.deepEqual([run.failure.code, run.attemptsOf('boom'), run.stderr.length], ['uncaught-exception', 2, 2]);
  assert.match(run.failure.message, /^SyntaxError: /);
  assert.match(run.stderr[0].text, /SyntaxError[\s\S]*testing\.test\.js/);
});

test('a step that never settles fails the job instead of hanging it', async () => {
  const kind = defineKind({ name: 'spin', steps: { spin: () => Outcome.snooze(1) } });
  const run = await runJob(kind, {}, { maxCallsPerStep: 5 });
  assert.deepEqual([run.failure.code, run.calls.length], ['call-limit', 5]);
});

test('runs at once see only their own host', async () => {
  const kind = defineKind({
    name: 'slow',
    steps: {
      async only(ctx) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        log.info(`region ${config.get('region')}`);
        return config.get('region');
      },
    },
  });
  const [eu, us] = await Promise.all([runJob(kind, {}, { config: { region: 'eu' } }), runJob(kind, {}, { config: { region: 'us' } })]);
  assert.deepEqual([eu.output('only'), us.output('only')], ['eu', 'us']);
  assert.deepEqual([eu.logs[0].message, us.logs[0].message], ['region eu', 'region us']);
});
