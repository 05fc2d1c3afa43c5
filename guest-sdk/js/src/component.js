// Glue for the component build only: the generated entry module imports the WIT
// interfaces (which exist only inside the component) and hands them to `bindWit`.
// Nothing else in the SDK or in a kind imports them, so both run under Node as well.

import { bindHost } from './host.js';

/**
 * Binds the `spindle:job/host` and `spindle:job/config` imports as the SDK's host.
 * Outbound HTTP is the engine's `fetch` (componentize-js's `http` feature, over
 * `wasi:http/outgoing-handler`), when the build kept it.
 */
export function bindWit({ host, config }) {
  bindHost({
    log: (level, message) => host.log(level, message),
    heartbeat: (progress) => host.heartbeat(progress),
    priorOutput: (step) => host.priorOutput(step),
    config: {
      get: (name) => config.get(name),
      secret: (name) => config.secret(name),
      hmacSha256: (name, message) => config.hmacSha256(name, message),
    },
    fetch(input, init) {
      if (typeof globalThis.fetch !== 'function') {
        return Promise.reject(new Error('this component was built without outbound HTTP (the `http` feature)'));
      }
      return globalThis.fetch(input, init);
    },
    stderr: (text) => console.error(text),
  });
}
