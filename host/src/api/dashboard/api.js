// The dashboard's only way out: the public /v1 API with the session's bearer token.
// The token lives in sessionStorage (never localStorage, never a URL) and goes out only
// in the Authorization header.

const TOKEN = 'spindle.token';
const ROLE = 'spindle.role';
const TENANT = 'spindle.tenant';
/** The tenant whose jobs the operator reads (where the host allows it), if any. */
const READING = 'spindle.reading';

export const session = {
  get token() { return sessionStorage.getItem(TOKEN); },
  get role() { return sessionStorage.getItem(ROLE); },
  get tenant() { return sessionStorage.getItem(TENANT); },
  get reading() { return this.role === 'operator' ? sessionStorage.getItem(READING) : null; },
  /** The operator starts (a tenant's name) or stops (null) reading a tenant's jobs. */
  read(tenant) {
    if (tenant) sessionStorage.setItem(READING, tenant); else sessionStorage.removeItem(READING);
    kindsCache = null;
  },
  set(token, role, tenant) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(ROLE, role);
    if (tenant) sessionStorage.setItem(TENANT, tenant); else sessionStorage.removeItem(TENANT);
  },
  clear() {
    for (const key of [TOKEN, ROLE, TENANT, READING]) sessionStorage.removeItem(key);
    kindsCache = null;
  },
};

/** An answer of the API that was not a success: `{"error": {code, message, reason?, state?}}`. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(detail.message || detail.code);
    this.name = 'ApiError';
    this.status = status;
    this.code = detail.code;
    this.reason = detail.reason;
    this.state = detail.state;
    /** For `invalid-input`: `[{pointer, message}]`, the input's violations of the kind's schema. */
    this.violations = detail.violations || [];
  }
}

let unauthorised = () => {};
/** What to do when the API answers 401: the app goes back to sign-in. */
export function onUnauthorised(handler) { unauthorised = handler; }

async function errorOf(res) {
  let detail = null;
  try {
    const body = await res.json();
    detail = body && body.error;
  } catch { /* not JSON */ }
  if (!detail || typeof detail.code !== 'string') {
    detail = { code: `http-${res.status}`, message: res.statusText || 'the request failed' };
  }
  return new ApiError(res.status, detail);
}

function headers(token, extra) {
  const out = { Accept: 'application/json', ...extra };
  if (token) out.Authorization = `Bearer ${token}`;
  // The operator reading a tenant's jobs names it; the host writes each read to that
  // tenant's audit trail.
  if (token && token === session.token && session.reading) out['Spindle-Tenant'] = session.reading;
  return out;
}

async function send(path, init) {
  try {
    return await fetch(path, { cache: 'no-store', credentials: 'omit', ...init });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'network', message: `the host did not answer (${e.message})` });
  }
}

/**
 * One request. `body`: a Blob/File (sent raw with `contentType`) or any JSON value.
 * `token`: probe with this token instead of the session's (sign-in). Answers
 * `{status, body}`; throws ApiError for any non-2xx.
 */
export async function request(method, path, { body, contentType, signal, token } = {}) {
  const extra = {};
  let payload;
  if (body instanceof Blob) {
    payload = body;
    extra['Content-Type'] = contentType || 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    extra['Content-Type'] = 'application/json';
  }
  const res = await send(path, { method, headers: headers(token ?? session.token, extra), body: payload, signal });
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && token === undefined) unauthorised(err);
    throw err;
  }
  const text = await res.text();
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch {
      throw new ApiError(res.status, { code: 'bad-response', message: `${path} did not answer JSON` });
    }
  }
  return { status: res.status, body: parsed };
}

export const get = (path, opts) => request('GET', path, opts).then((r) => r.body);
export const post = (path, body, opts) => request('POST', path, { ...opts, body }).then((r) => r.body);

/** `?a=1&b=2` from an object, leaving out empty values. */
export function qs(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') s.set(k, String(v));
  }
  const text = s.toString();
  return text ? `?${text}` : '';
}

export const enc = encodeURIComponent;

/**
 * Reads a server-sent event stream with fetch (EventSource cannot send headers) and
 * calls `onEvent(type, data)` per event. Resolves when the server closes the stream;
 * rejects with ApiError when the answer is not a success.
 */
export async function stream(path, onEvent, signal) {
  const res = await send(path, {
    method: 'GET',
    headers: headers(session.token, { Accept: 'text/event-stream' }),
    signal,
  });
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401) unauthorised(err);
    throw err;
  }
  const type = res.headers.get('Content-Type') || '';
  if (!type.includes('text/event-stream') || !res.body) {
    throw new ApiError(res.status, { code: 'not-a-stream', message: `${path} did not answer an event stream` });
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let event = '';
  let data = [];
  const line = (text) => {
    if (text === '') {
      if (data.length) onEvent(event || 'message', data.join('\n'));
      event = '';
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      for (;;) {
        const m = /\r\n|\n|\r/.exec(buffer);
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (!m || (m[0] === '\r' && m.index === buffer.length - 1)) break;
        line(buffer.slice(0, m.index));
        buffer = buffer.slice(m.index + m[0].length);
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'stream-broken', message: `the stream ${path} broke (${e.message})` });
  }
  if (buffer) line(buffer);
  line('');
}

/** Which role a token has: `tenant` (GET /v1/kinds is 200), or `operator` (403 there, 200 at /v1/tenants). */
export async function detectRole(token) {
  try {
    await request('GET', '/v1/kinds', { token });
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 403) throw e;
    await request('GET', '/v1/tenants', { token });
    return { role: 'operator' };
  }
  let tenant = null;
  try {
    tenant = (await request('GET', '/v1/usage', { token })).body?.tenant ?? null;
  } catch { /* the name is a nicety */ }
  return { role: 'tenant', tenant };
}

let kindsCache = null;
/** The tenant's kinds, cached for 30 s (filters ask often). */
export function kinds(signal, fresh = false) {
  if (fresh || !kindsCache || Date.now() - kindsCache.at > 30_000) {
    const promise = get('/v1/kinds', {});
    kindsCache = { at: Date.now(), promise };
    promise.catch(() => { if (kindsCache?.promise === promise) kindsCache = null; });
  }
  const { promise } = kindsCache;
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    const stop = () => reject(new DOMException('aborted', 'AbortError'));
    if (signal.aborted) return stop();
    signal.addEventListener('abort', stop, { once: true });
    promise.then(resolve, reject);
  });
}
export function forgetKinds() { kindsCache = null; }
