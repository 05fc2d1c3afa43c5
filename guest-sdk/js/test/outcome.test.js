import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Child, FanOut, Outcome, Priority, Refused } from '../src/index.js';
import { json, text } from './helpers.js';

test('outcomes carry the WIT variants in jco\'s shape', () => {
  assert.deepEqual(json(Outcome.complete({ rows: 3 }).wit.val), { rows: 3 });
  assert.deepEqual(Outcome.completeBytes('raw').wit, { tag: 'complete', val: new TextEncoder().encode('raw') });
  assert.deepEqual(Outcome.skip('no receipt').wit, { tag: 'skip', val: 'no receipt' });
  assert.deepEqual(Outcome.retryable('busy').wit, { tag: 'retryable', val: { code: 'busy', message: 'busy' } });
  assert.deepEqual(Outcome.refused('no', 'never').wit, { tag: 'refused', val: { code: 'no', message: 'never' } });
  assert.deepEqual(Outcome.more('300', 300, 1000).wit, { tag: 'more', val: { cursor: '300', done: 300n, total: 1000n } });
  assert.deepEqual(Outcome.more('1', 1n).wit.val.total, undefined);
  assert.deepEqual(Outcome.snooze(30).wit, { tag: 'snooze', val: 30 });
  assert.deepEqual(Outcome.awaitSignal('shipped', 60, { cursor: 'w' }).wit, { tag: 'await-signal', val: { name: 'shipped', timeoutSecs: 60, cursor: 'w' } });
  assert.deepEqual(Outcome.fromError(new Refused('x')).wit, { tag: 'refused', val: { code: 'x', message: 'x' } });
  assert.equal(Outcome.snooze(1).tag, 'snooze');
});

test('bad numbers fail where they are written', () => {
  assert.throws(() => Outcome.snooze(-1), RangeError);
  assert.throws(() => Outcome.more('c', 1.5), RangeError);
  assert.throws(() => Outcome.awaitSignal('s', 2 ** 32), RangeError);
});

test('cursors attach to the outcomes that carry one', () => {
  assert.equal(Outcome.more('a', 1).withCursor('b').wit.val.cursor, 'b');
  assert.equal(Outcome.awaitSignal('s', 1).withCursorJson([1, 2]).wit.val.cursor, '[1,2]');
  assert.equal(Outcome.moreJson({ page: 2 }, 2).wit.val.cursor, '{"page":2}');
  const snooze = Outcome.snooze(5);
  assert.equal(snooze.withCursor('x'), snooze);
  const bad = Outcome.more('a', 1).withCursorJson(1n);
  assert.deepEqual([bad.tag, bad.wit.val.code], ['refused', 'invalid-cursor']);
  assert.equal(Outcome.moreJson(undefined, 1).wit.val.code, 'invalid-cursor');
});

test('a fan-out carries every child option in order', () => {
  const outcome = Outcome.awaitChildren(
    FanOut.count(2)
      .child('thumbnail', { width: 4 }, { idempotencyKey: 'k0', priority: Priority.background, leaseKeys: ['gpu', 'disk'] })
      .children([new Child('raw', new Uint8Array([0, 1]))])
      .leftoverKeep()
      .cursor('1'),
  );
  const { children, join, leftover, cursor } = outcome.wit.val;
  assert.deepEqual([outcome.tag, join, leftover, cursor], ['await-children', { tag: 'count', val: 2 }, 'keep', '1']);
  assert.deepEqual(children.map((child) => ({ ...child, input: text(child.input) })), [
    { kind: 'thumbnail', input: '{"width":4}', idempotencyKey: 'k0', priority: 'background', leaseKeys: ['gpu', 'disk'] },
    { kind: 'raw', input: '\u0000\u0001', idempotencyKey: undefined, priority: undefined, leaseKeys: [] },
  ]);
  assert.deepEqual([FanOut.all().toWit().join, FanOut.any().toWit().leftover], [{ tag: 'all' }, 'cancel']);
  assert.equal(FanOut.all().child('a', 1).size, 1);
  assert.throws(() => new Child('a', 1, { priority: 'urgent' }), RangeError);
});

test('an unserialisable child input is refused', () => {
  const outcome = Outcome.awaitChildren(FanOut.all().child('ok', 1).child('bad', { n: 1n }));
  assert.deepEqual([outcome.tag, outcome.wit.val.code], ['refused', 'invalid-child-input']);
});
