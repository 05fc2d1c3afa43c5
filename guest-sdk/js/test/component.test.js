// The component's glue, with stand-ins for the WIT imports the entry module binds.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { bindWit } from '../src/component.js';
import { config, defineKind, fetch, log } from '../src/index.js';
import { json, stepInput } from './helpers.js';

const calls = [];
const host = {
  log: (level, message) => calls.push(['log', level, message]),
  heartbeat: (progress) => {
    calls.push(['heartbeat', progress]);
    return 'stop-lease-lost';
  },
  priorOutput: (step) => (step === 'capped' ? new TextEncoder().encode('{"from": "host"}') : undefined),
};
const wit = { get: (name) => (name === 'region' ? 'eu' : undefined), secret: (name) => `{{${name}}}`, hmacSha256: (name, message) => message };
bindWit({ host, config: wit });

test('the bound WIT host answers the module-level helpers', () => {
  log.warn('hello');
  assert.deepEqual(calls.pop(), ['log', 'warn', 'hello']);
  assert.equal(config.get('region'), 'eu');
  assert.equal(config.secret('token'), '{{token}}');
  assert.deepEqual([...config.hmacSha256('key', 'a')], [97]);
});

test('runStep reaches the bound host: prior-output fallback, heartbeats, logs', async () => {
  const kind = defineKind({
    name: 'glue',
    steps: {
      only(ctx) {
        const reply = ctx.heartbeat({ cursor: 'c', done: 2, total: 4 });
        ctx.log.info(`reply ${reply}`);
        return ctx.prior('capped');
      },
    },
  });
  const outcome = await kind.runStep(stepInput());
  assert.deepEqual(json(outcome.val), { from: 'host' });
  assert.deepEqual(calls.splice(0), [['heartbeat', { cursor: 'c', done: 2n, total: 4n }], ['log', 'info', 'reply stop-lease-lost']]);
});

test('a build without the http feature fails fetches as retryable', async () => {
  const original = globalThis.fetch;
  delete globalThis.fetch;
  try {
    await assert.rejects(fetch('https://example.com'), { code: 'upstream-unavailable', detail: /without outbound HTTP/ });
  } finally {
    globalThis.fetch = original;
  }
});
