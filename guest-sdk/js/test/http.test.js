import assert from 'node:assert/strict';
import { test } from 'node:test';

import { HttpError, errorForStatus, readJson } from '../src/index.js';
import { httpErrorOf } from '../src/http.js';

test('error statuses become the matching step failures', () => {
  assert.equal(errorForStatus(new Response(null, { status: 204 })).status, 204);
  for (const [status, retryable] of [[429, true], [500, true], [503, true], [400, false], [404, false]]) {
    assert.throws(() => errorForStatus(new Response('secret body', { status })), (error) => {
      assert.deepEqual([error.retryable, error.code], [retryable, `upstream-${status}`]);
      assert.doesNotMatch(error.message, /secret/);
      return true;
    });
  }
});

test('a body that is not the expected JSON is refused invalid-response', async () => {
  assert.deepEqual(await readJson(new Response('{"eur": 0.9}')), { eur: 0.9 });
  await assert.rejects(readJson(new Response('<html>')), { code: 'invalid-response' });
  await assert.rejects(readJson(new Response('[]'), (value) => !Array.isArray(value)), { code: 'invalid-response' });
});

test('fetch failures are classified from the engine\'s text where it tells', () => {
  const reasons = [
    [new TypeError('HTTP-request-denied'), 'denied', false, 'http-request-denied'],
    [new TypeError('Invalid URL'), 'invalid-request', false, 'http-request-invalid'],
    [new TypeError('connection-read-timeout'), 'timeout', true, 'upstream-unavailable'],
    [new TypeError('fetch failed', { cause: 'ECONNREFUSED connection refused' }), 'connect', true, 'upstream-unavailable'],
    // StarlingMonkey's text for every wasi:http error, a denial included.
    [new TypeError('NetworkError when attempting to fetch resource'), 'other', true, 'upstream-unavailable'],
  ];
  for (const [error, reason, retryable, code] of reasons) {
    const mapped = httpErrorOf(error);
    assert.deepEqual([mapped.reason, mapped.retryable, mapped.code], [reason, retryable, code], error.message);
  }
  const own = new HttpError('too-large');
  assert.equal(httpErrorOf(own), own);
});
