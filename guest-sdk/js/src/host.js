// The one place the SDK reaches its host through.
//
// Inside a component the build's entry module binds the WIT imports here (see
// component.js): they are ES imports that exist only there, so no other module of the
// SDK or of a kind imports them, and the same code runs under Node. The local runner
// scopes a stand-in host to each job it runs; with neither, the detached host below
// answers as the Rust SDK does off wasm.
//
// A host is: log(level, message), heartbeat(progress) -> reply, priorOutput(step) ->
// bytes | undefined, config { get, secret, hmacSha256 }, fetch(input, init), and
// stderr(text) for uncaught exceptions.

/** Off any host: lines go to stderr, heartbeats proceed, nothing is configured. */
export const detachedHost = Object.freeze({
  log(level, message) {
    console.error(`[${level}] ${message}`);
  },
  heartbeat() {
    return 'proceed';
  },
  priorOutput() {
    return undefined;
  },
  config: Object.freeze({
    get: () => undefined,
    secret: () => undefined,
    hmacSha256: () => undefined,
  }),
  async fetch() {
    throw new Error('no outbound HTTP here: run the step under runJob with an `http` handler, or on a host');
  },
  stderr(text) {
    console.error(text);
  },
});

let bound = detachedHost;
let scoped = () => undefined;

/** The host a call is running against: the runner's for its job, else the bound one. */
export function currentHost() {
  return scoped() ?? bound;
}

/** Makes `host` the process's host (the component's entry does this once). */
export function bindHost(host) {
  bound = host;
}

/** Lets the local runner say which host the current async context runs against. */
export function setHostScope(lookup) {
  scoped = lookup;
}
