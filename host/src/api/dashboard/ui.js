// Small DOM and formatting helpers. Every piece of API data goes into the page as text
// (textContent), never as markup.

const SVG = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    else if (key === 'style') Object.assign(el.style, value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : isolated(String(child)));
  }
}

// Bidirectional-text controls (LRE…RLO, LRI…PDI, LRM, RLM, ALM): in a tenant's text they
// would reorder what follows them (a key shown as "edirrevo-LTR").
const BIDI_CONTROL = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
// Text that takes part in bidirectional reordering: right-to-left letters or controls.
const BIDI_TEXT = /[\u0590-\u08FF\uFB1D-\uFDFF\uFE70-\uFEFF\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/;

/**
 * Text as a node that cannot reorder its surroundings: plain text stays a text node; text
 * with right-to-left letters goes into its own `<bdi>`, and each control in it is shown as
 * a visible mark (`⟨U+202E⟩`) instead of acting.
 */
export function isolated(text) {
  if (!BIDI_TEXT.test(text)) return text;
  const bdi = document.createElement('bdi');
  let at = 0;
  for (const match of text.matchAll(BIDI_CONTROL)) {
    if (match.index > at) bdi.append(text.slice(at, match.index));
    const code = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    const mark = document.createElement('span');
    mark.className = 'bidi-control';
    mark.title = `a bidirectional-text control, U+${code}, shown instead of applied`;
    mark.dataset.test = 'bidi-control';
    mark.textContent = `⟨U+${code}⟩`;
    bdi.append(mark);
    at = match.index + match[0].length;
  }
  if (at < text.length) bdi.append(text.slice(at));
  return bdi;
}

/** `h('a', {href, 'data-test': 'x'}, 'text', child…)`. */
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
/** The same for SVG elements. */
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG, tag), attrs, children);

export function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }
export function replace(el, ...children) { clear(el); append(el, children); return el; }

// ---- errors ----------------------------------------------------------------------------

let errorSink = (err) => console.error(err);
export function onError(sink) { errorSink = sink; }
/** Shows an API (or any) error in the page's banner; aborted requests are not errors. */
export function reportError(err) {
  if (!err || err.name === 'AbortError') return;
  errorSink(err);
}
/** `code: message (reason, state)` for an ApiError, or the message. */
export function describeError(err) {
  if (!err) return '';
  const extra = [err.reason && `reason ${err.reason}`, err.state && `state ${err.state}`].filter(Boolean);
  const text = err.code ? `${err.code}: ${err.message}` : String(err.message || err);
  return extra.length ? `${text} (${extra.join(', ')})` : text;
}

// ---- times, sizes ----------------------------------------------------------------------

const pad = (n, w = 2) => String(n).padStart(w, '0');

export function parseTime(iso) {
  if (!iso) return NaN;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? NaN : t;
}

/** Local time, `2026-05-09 07:29:33`. */
export function fmtAbs(iso) {
  const t = parseTime(iso);
  if (Number.isNaN(t)) return '—';
  const d = new Date(t);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** `3 min ago`, `in 12 s`. */
export function fmtRel(iso, now = Date.now()) {
  const t = parseTime(iso);
  if (Number.isNaN(t)) return '—';
  const diff = t - now;
  const a = Math.abs(diff) / 1000;
  let text;
  if (a < 5) return 'just now';
  if (a < 60) text = `${Math.round(a)} s`;
  else if (a < 3600) text = `${Math.round(a / 60)} min`;
  else if (a < 86400) text = `${Math.round(a / 3600)} h`;
  else text = `${Math.round(a / 86400)} d`;
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

/** A `<time>` showing the relative time, the absolute (local and UTC) in its title; `both` shows both. */
export function timeEl(iso, { both = false } = {}) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const t = parseTime(iso);
  const utc = Number.isNaN(t) ? iso : new Date(t).toISOString().replace('.000Z', 'Z');
  const el = h('time', { datetime: iso, title: `${fmtAbs(iso)} local · ${utc}`, 'data-rel': both ? 'both' : 'rel' });
  el.textContent = both ? `${fmtAbs(iso)} (${fmtRel(iso)})` : fmtRel(iso);
  return el;
}

/** Keeps every relative time on the page current. */
export function tickTimes() {
  for (const el of document.querySelectorAll('time[data-rel]')) {
    const iso = el.getAttribute('datetime');
    el.textContent = el.dataset.rel === 'both' ? `${fmtAbs(iso)} (${fmtRel(iso)})` : fmtRel(iso);
  }
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec.toFixed(sec < 10 ? 2 : 1)} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min ${Math.round(sec % 60)} s`;
  const hours = Math.floor(min / 60);
  if (hours < 48) return `${hours} h ${min % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export const fmtNum = (n) => (n === undefined || n === null ? '—' : Number(n).toLocaleString('en-US'));

// ---- small pieces ----------------------------------------------------------------------

/**
 * A short form of an id: job ids are UUIDv7, whose first digits are the creation time
 * (alike for a minute of jobs), so the short form is the random tail: `…a3a6c5c8`.
 */
export const shortId = (id) => {
  if (!id) return '';
  const text = String(id);
  return text.length > 10 ? `…${text.slice(-8)}` : text;
};
/** The head of a content digest (SHA-256 hex), as digests are usually shortened. */
export const shortDigest = (d) => (d ? String(d).replace(/^sha256:/, '').slice(0, 12) : '');
export const FINAL = new Set(['succeeded', 'failed', 'cancelled']);
export const isFinal = (state) => FINAL.has(state);

/** A state (job, step, attempt, deploy, operation) as a coloured badge; the word is always shown. */
export function badge(state, attrs = {}) {
  const word = state || 'unknown';
  return h('span', { class: `badge st-${word.replace(/[^a-z0-9-]/gi, '-')}`, ...attrs }, word);
}

export function progressBar(pct, attrs = {}) {
  const v = Math.max(0, Math.min(100, Number(pct) || 0));
  return h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': v, 'aria-label': `${v}% done`, ...attrs },
    h('div', { class: 'progress-fill', style: { width: `${v}%` } }),
    h('span', { class: 'progress-text' }, `${v}%`));
}

export const mono = (text, attrs = {}) => h('code', { class: 'mono', ...attrs }, text);

/** A job id as a short monospace link with the whole id in its title. */
export function jobLink(id, attrs = {}) {
  return h('a', { href: `#/jobs/${encodeURIComponent(id)}`, class: 'mono', title: id, ...attrs }, shortId(id));
}

/**
 * A JSON value pretty-printed in a collapsible `<pre>`. When the API withholds a value (over
 * its cap, or not JSON) it says so in a field of its own (`withheld: {reason, bytes}`), never
 * inside the data, so a tenant's value can never pass for this notice.
 */
export function jsonBlock(value, summary, { open = false, attrs = {}, openSet, key, withheld } = {}) {
  let note = null;
  if (withheld && withheld.reason === 'too-large') note = `Too large to show: ${fmtBytes(withheld.bytes)} (the API shows values up to 64 KiB).`;
  else if (withheld) note = `Not JSON: ${fmtBytes(withheld.bytes)} of bytes.`;
  const text = value === undefined ? 'undefined' : JSON.stringify(value, null, 2);
  const isOpen = openSet && key ? openSet.has(key) : open;
  const details = h('details', { class: 'json', open: isOpen, ...attrs },
    h('summary', {}, summary, h('span', { class: 'muted small' }, note ? ' · truncated' : ` · ${fmtBytes(new Blob([text]).size)}`)),
    note ? h('p', { class: 'note', 'data-test': 'truncated' }, note) : h('pre', { class: 'code' }, text));
  if (openSet && key) details.addEventListener('toggle', () => (details.open ? openSet.add(key) : openSet.delete(key)));
  return details;
}

/** A `<details>` whose open state survives re-rendering (kept in `openSet` under `key`). */
export function collapsible(key, openSet, summary, body, attrs = {}) {
  const details = h('details', { class: 'panel', open: openSet.has(key), ...attrs }, h('summary', {}, summary), body);
  details.addEventListener('toggle', () => (details.open ? openSet.add(key) : openSet.delete(key)));
  return details;
}

/** A table from column headers and rows of cells. */
export function table(headers, rows, attrs = {}) {
  const first = rows.flat(Infinity).find((r) => r instanceof HTMLTableRowElement && !r.classList.contains('sub'));
  const numeric = (i) => Boolean(first && first.children[i] && first.children[i].classList.contains('num'));
  return h('div', { class: 'table-wrap' },
    h('table', attrs,
      h('thead', {}, h('tr', {}, headers.map((x, i) => h('th', { scope: 'col', class: numeric(i) ? 'num' : null }, x)))),
      h('tbody', {}, rows)));
}

export const empty = (text, attrs = {}) => h('p', { class: 'empty', ...attrs }, text);

/** Calls `fn` every `ms` until `signal` aborts (never two at once). */
export function every(ms, fn, signal) {
  let timer = null;
  const loop = async () => {
    if (signal.aborted) return;
    try { await fn(); } catch (e) { reportError(e); }
    if (!signal.aborted) timer = setTimeout(loop, ms);
  };
  timer = setTimeout(loop, ms);
  signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
}

export const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
});

/** `datetime-local` value (local time) for an RFC 3339 time, and back. */
export function toLocalInput(iso) {
  const t = parseTime(iso);
  if (Number.isNaN(t)) return '';
  const d = new Date(t);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
export function fromLocalInput(value) {
  if (!value) return '';
  const t = new Date(value).getTime();
  return Number.isNaN(t) ? '' : new Date(t).toISOString();
}

/** A labelled form control. */
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label), control, hint ? h('span', { class: 'hint' }, hint) : null);
}

export function select(options, value, attrs = {}) {
  const el = h('select', attrs, options.map(([v, text]) => h('option', { value: v }, text)));
  el.value = value ?? '';
  if (el.value !== (value ?? '')) {
    el.append(h('option', { value }, value));
    el.value = value;
  }
  return el;
}

/** A section with a heading. */
export function section(title, attrs, ...children) {
  return h('section', { class: 'card', ...attrs }, title ? h('h2', {}, title) : null, children);
}

/**
 * A card's result line, hidden until `say(state, ...content)` shows it; `data-state`
 * carries the state for the browser tests.
 */
export function resultBox(test) {
  const result = h('div', { class: 'deploy-result', 'data-test': test, 'aria-live': 'polite', hidden: true });
  const say = (state, ...text) => {
    result.hidden = false;
    result.dataset.state = state;
    result.className = `deploy-result ${state}`;
    replace(result, ...text);
  };
  return [result, say];
}
