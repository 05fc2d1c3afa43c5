// The fetch kind under the SDK's local runner, an upstream answered by a handler.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { HttpError } from '@spindle/guest';
import { runJob } from '@spindle/guest/testing';

import { kind } from '../fetch.js';

const input = { url: 'https://api.example/hook', denied_url: 'https://elsewhere.example/', message: 'hi' };

test('the secret goes in the header, and the denial is a catchable HttpError', async () => {
  const seen = [];
  const run = await runJob(kind, input, {
    secrets: { 'api-token': 's3cr3t' },
    http: async (request) => {
      if (request.url !== input.url) throw new HttpError('denied', 'no rule allows it');
      seen.push({ auth: request.headers.get('authorization'), body: await request.text() });
      return new Response('{"ok": true}', { status: 200 });
    },
  });
  assert.equal(run.state, 'succeeded', JSON.stringify(run.failure));
  assert.deepEqual(run.output('call'), {
    status: 200, body: '{"ok": true}', denied: true, denied_error: 'HttpError(denied): the outbound request is not allowed by policy',
  });
  assert.deepEqual(seen, [{ auth: 'Bearer s3cr3t', body: '{"message":"hi"}' }]);
});

test('an error status is retried', async () => {
  const run = await runJob(kind, input, { http: () => new Response('', { status: 503 }) });
  assert.equal(run.state, 'failed');
  assert.equal(run.failure.code, 'upstream-status');
});
