// Shared test helpers: hand-built WIT inputs and a recording host.

const encoder = new TextEncoder();
export const bytes = (text) => encoder.encode(text);
export const text = (data) => new TextDecoder().decode(data);
export const json = (data) => JSON.parse(text(data));

/** A WIT step-input with defaults. */
export function stepInput({ step = 'only', attempt = 1, payload = '{}', prior = {}, cursor, awaited } = {}) {
  return {
    jobId: 'job-1',
    step,
    attempt,
    idempotencyKey: `job-1/${step}`,
    payload: typeof payload === 'string' ? bytes(payload) : payload,
    prior: Object.entries(prior).map(([key, output]) => ({ step: key, output: bytes(output) })),
    cursor,
    awaited,
  };
}

/** A host that records what reaches it; `priors` answers priorOutput. */
export function recordingHost({ priors = {}, replies = [] } = {}) {
  const host = {
    lines: [],
    errors: [],
    beats: [],
    log: (level, message) => host.lines.push([level, message]),
    heartbeat: (progress) => {
      host.beats.push(progress);
      return replies.shift() ?? 'proceed';
    },
    priorOutput: (step) => (priors[step] === undefined ? undefined : bytes(priors[step])),
    config: { get: () => undefined, secret: () => undefined, hmacSha256: () => undefined },
    fetch: async () => new Response('ok'),
    stderr: (data) => host.errors.push(data),
  };
  return host;
}
