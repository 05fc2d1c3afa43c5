// The kind's deployment settings and its tenant's secrets.
//
// Settings are plain values set per deployment (`spindle deploy KIND FILE --set
// NAME=VALUE`). A secret is never held by the guest: `secret(name)` returns a
// placeholder the host swaps for the value in the headers of outbound requests its policy
// allows, and `hmacSha256` signs with a secret without revealing it.

import { currentHost } from './host.js';
import { toBytes } from './json.js';

/** `{ get, secret, hmacSha256 }` answered by `hostOf()`. */
export function makeConfig(hostOf) {
  return Object.freeze({
    /** The deployment's setting `name`, or undefined. */
    get: (name) => hostOf().config.get(String(name)),
    /** A placeholder for the tenant's secret `name`, or undefined if not declared and set. Opaque: do not store or compare it. */
    secret: (name) => hostOf().config.secret(String(name)),
    /** HMAC-SHA256 of `message` (bytes or UTF-8 text) under the secret `name`, or undefined. */
    hmacSha256: (name, message) => hostOf().config.hmacSha256(String(name), toBytes(message)),
  });
}

/** Configuration of whatever host the current call runs against. */
export const config = makeConfig(currentHost);
