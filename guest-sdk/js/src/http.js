// Outbound HTTP from a step: the standard fetch(), with failures that map onto outcomes.
//
// On a host the request goes out through `wasi:http/outgoing-handler`, and the host's
// policy denies it unless the operator, the tenant and the deployment all allow its
// destination. Credentials go in headers as `config.secret()` placeholders; the host
// puts the values in place once the policy allowed the request. Under the local runner
// the test's `http` handler answers instead.

import { Refused, Retryable, StepError } from './errors.js';
import { currentHost } from './host.js';
import { parseJson } from './json.js';

/** Why a request got no response. A response, whatever its status, is not an HttpError. */
export class HttpError extends StepError {
  /**
   * `reason`: `denied` (the policy refused it) and `invalid-request` are refused, since
   * the same request fails the same way again; `timeout`, `connect`, `too-large`,
   * `connection-limit` and `other` are retryable `upstream-unavailable`.
   */
  constructor(reason, detail) {
    const refused = { denied: 'http-request-denied', 'invalid-request': 'http-request-invalid' }[reason];
    const message = {
      denied: 'the outbound request is not allowed by policy',
      'invalid-request': 'the outbound request is malformed',
    }[reason] ?? 'the upstream service did not answer';
    super(!refused, refused ?? 'upstream-unavailable', message, { detail: detail ?? reason });
    this.reason = reason;
  }
}

// What the engines' fetch errors say about the wasi:http error code, by its WIT name.
const REASONS = [
  [/HTTP-request-denied|destination-IP-prohibited/i, 'denied'],
  [/HTTP-request-(method|URI|header|body|trailer)|invalid URL|Invalid URL/i, 'invalid-request'],
  [/timeout/i, 'timeout'],
  [/HTTP-response-body-size/i, 'too-large'],
  [/connection-limit/i, 'connection-limit'],
  [/DNS|destination|connection|TLS/i, 'connect'],
];

/** A fetch failure as an HttpError, classified from the engine's message where it can be. */
export function httpErrorOf(error) {
  if (error instanceof HttpError) return error;
  const text = error instanceof Error ? `${error.name}: ${error.message}${error.cause ? ` (${error.cause})` : ''}` : String(error);
  const reason = REASONS.find(([pattern]) => pattern.test(text))?.[1] ?? 'other';
  return new HttpError(reason, text);
}

/** fetch() through `hostOf()`, rejecting with an HttpError when no response came. */
export function makeFetch(hostOf) {
  return async (input, init) => {
    try {
      return await hostOf().fetch(input, init);
    } catch (error) {
      throw httpErrorOf(error);
    }
  };
}

/** fetch() through whatever host the current call runs against. */
export const fetch = makeFetch(currentHost);

/**
 * The response if its status is not an error, else the failure it means: 429 and 5xx
 * retryable (the upstream may recover), other 4xx refused; code `upstream-<status>`. The
 * body stays out of the failure.
 */
export function errorForStatus(response) {
  const status = response.status;
  if (status === 429 || (status >= 500 && status <= 599)) {
    throw new Retryable(`upstream-${status}`, `the upstream service answered ${status}; retrying later`);
  }
  if (status >= 400 && status <= 499) {
    throw new Refused(`upstream-${status}`, `the upstream service rejected the request (${status})`);
  }
  return response;
}

/** The body as JSON (checked like ctx.input); refused `invalid-response` if it does not parse or fit. */
export async function readJson(response, check) {
  const bytes = new Uint8Array(await response.arrayBuffer());
  return parseJson(bytes, { code: 'invalid-response', what: 'the upstream\'s response', check });
}
