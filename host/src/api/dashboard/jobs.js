// #/jobs: the tenant's jobs, newest first, filtered by what the hash holds
// (#/jobs?state=failed&kind=greet), a page at a time by cursor, the first page live. A
// filter applies as it changes (text after a pause in typing), and the address follows.
// Above the list, the jobs per state (of the chosen kind) and per kind, live too; below
// the filters, a bulk cancel or retry of what they match.

import { get, qs, kinds, session } from './api.js';
import { bulkBar } from './bulk.js';
import {
  h, replace, badge, progressBar, timeEl, jobLink, mono, table, empty, every, reportError,
  field, select, toLocalInput, fromLocalInput, shortId, fmtNum,
} from './ui.js';

export const STATES = ['pending', 'running', 'paused', 'waiting', 'succeeded', 'failed', 'cancelled'];
export const PRIORITIES = ['critical', 'scheduled', 'normal', 'background'];
const PAGE = 50;
const LIVE_KEY = 'spindle.live';
const FILTERS = ['state', 'kind', 'priority', 'created_after', 'created_before', 'q', 'parent'];
/** How long typing must pause before the text filter applies. */
const TYPING_PAUSE_MS = 300;

/** One row of a jobs table (also used for children and dead letters). */
export function jobRow(job, test = 'job-row') {
  return h('tr', { 'data-test': test, 'data-id': job.id },
    h('td', {}, jobLink(job.id), job.idempotency_key ? h('div', { class: 'muted small mono', title: 'idempotency key' }, job.idempotency_key) : null),
    h('td', {}, h('a', { href: `#/kinds/${encodeURIComponent(job.kind)}`, class: 'mono' }, `${job.kind}@${job.kind_version}`)),
    h('td', {}, badge(job.state, { 'data-test': 'row-state' })),
    h('td', {}, progressBar(job.progress)),
    h('td', {}, job.priority ?? h('span', { class: 'muted' }, '—')),
    h('td', {}, timeEl(job.created_at)),
    h('td', {}, job.failure_code ? mono(job.failure_code, { 'data-test': 'row-failure' }) : h('span', { class: 'muted' }, '—')));
}

export const JOB_HEADERS = ['Job', 'Kind', 'State', 'Progress', 'Priority', 'Created', 'Failure'];

export async function renderJobs(view, ctx) {
  ctx.title('Jobs');
  const { signal, query } = ctx;
  const f = Object.fromEntries(FILTERS.map((k) => [k, query.get(k) || '']));
  const cursor = query.get('cursor') || '';

  const state = select([['', 'Any state'], ...STATES.map((x) => [x, x])], f.state, { 'data-test': 'filter-state', name: 'state' });
  const kind = select([['', 'Any kind']], f.kind, { 'data-test': 'filter-kind', name: 'kind' });
  const priority = select([['', 'Any priority'], ...PRIORITIES.map((x) => [x, x])], f.priority, { 'data-test': 'filter-priority', name: 'priority' });
  const after = h('input', { type: 'datetime-local', 'data-test': 'filter-after', name: 'created_after', value: toLocalInput(f.created_after) });
  const before = h('input', { type: 'datetime-local', 'data-test': 'filter-before', name: 'created_before', value: toLocalInput(f.created_before) });
  const text = h('input', { type: 'search', 'data-test': 'filter-q', name: 'q', value: f.q, placeholder: 'job id or idempotency key prefix', spellcheck: 'false' });

  kinds(signal).then((list) => {
    for (const k of list.kinds || []) if (k.kind !== f.kind) kind.append(h('option', { value: k.kind }, k.kind));
  }, reportError);

  /** The filters as the controls hold them. */
  const chosen = () => ({
    state: state.value, kind: kind.value, priority: priority.value,
    created_after: fromLocalInput(after.value), created_before: fromLocalInput(before.value),
    q: text.value.trim(), parent: f.parent,
  });
  /** Applies the controls' filters in place: the first page again, the address kept. */
  function applyNow() {
    const next = chosen();
    if (FILTERS.every((k) => next[k] === f[k])) return;
    // A later page starts over from the first, live, as a new address would.
    if (cursor) return ctx.go('/jobs', next);
    Object.assign(f, next);
    ctx.keep('/jobs', f);
    load().catch(reportError);
  }
  let typing = null;
  for (const control of [state, kind, priority, after, before]) control.addEventListener('change', applyNow);
  text.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(applyNow, TYPING_PAUSE_MS);
  });
  signal.addEventListener('abort', () => clearTimeout(typing), { once: true });

  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs', onsubmit: (e) => {
    e.preventDefault();
    clearTimeout(typing);
    ctx.go('/jobs', chosen());
  } },
  field('State', state), field('Kind', kind), field('Priority', priority),
  field('Created after', after), field('Created before', before), field('Id or key', text),
  h('div', { class: 'filter-buttons' },
    h('button', { type: 'submit', class: 'button primary', 'data-test': 'filter-apply' }, 'Apply'),
    h('a', { class: 'button subtle', href: '#/jobs', 'data-test': 'filter-reset' }, 'Reset')));

  const liveBox = h('input', { type: 'checkbox', 'data-test': 'live', id: 'live' });
  liveBox.checked = sessionStorage.getItem(LIVE_KEY) !== 'off';
  liveBox.disabled = Boolean(cursor);
  liveBox.addEventListener('change', () => sessionStorage.setItem(LIVE_KEY, liveBox.checked ? 'on' : 'off'));
  const updated = h('span', { class: 'muted small', 'aria-live': 'off' });
  const tbody = h('tbody');
  const tableEl = h('table', { 'data-test': 'jobs-table', 'data-skip-to': '', tabindex: -1 },
    h('caption', { class: 'sr-only' }, 'Jobs, newest first'),
    h('thead', {}, h('tr', {}, JOB_HEADERS.map((x) => h('th', { scope: 'col' }, x)))), tbody);
  const status = h('div', { class: 'table-status', 'aria-live': 'polite' });
  const next = h('button', { type: 'button', class: 'button', 'data-test': 'next-page', disabled: true }, 'Next page →');
  let nextCursor = null;
  next.addEventListener('click', () => { if (nextCursor !== null) ctx.go('/jobs', { ...f, cursor: nextCursor }); });

  // ---- counts: per state (of the kind chosen) and per kind ----
  const countsBar = h('nav', { class: 'counts', 'aria-label': 'Jobs per state', 'data-test': 'state-counts' });
  const kindCounts = h('div', { 'data-test': 'kind-counts' });
  const number = (c) => `${fmtNum(c.count)}${c.capped ? '+' : ''}`;
  function paintCounts(counts) {
    // With a kind chosen the host counted that kind's own jobs (`?kind=`).
    const mine = counts.states || [];
    const of = (st) => mine.find((c) => c.state === st) || { state: st, count: 0, capped: false };
    const all = { count: mine.reduce((n, c) => n + c.count, 0), capped: mine.some((c) => c.capped) };
    const chip = (st, c, label) => h('a', {
      class: ['state-count', f.state === st ? 'current' : null], href: `#/jobs${qs({ ...f, state: st })}`,
      'data-test': `count-${st || 'all'}`, 'data-count': c.count, 'aria-current': f.state === st ? 'true' : null,
      title: c.capped ? `at least ${fmtNum(c.count)}: the count stops at ${fmtNum(counts.cap)} a state` : null,
    }, h('span', { class: 'count-label' }, label), h('span', { class: 'count-n' }, number(c)));
    replace(countsBar, chip('', all, f.kind ? `all ${f.kind}` : 'all'), STATES.map((st) => chip(st, of(st), st)));
    const open = ['pending', 'running', 'paused', 'waiting'];
    const sum = (k, states) => {
      const cs = k.states.filter((c) => states.includes(c.state));
      return { count: cs.reduce((n, c) => n + c.count, 0), capped: cs.some((c) => c.capped) };
    };
    const rows = (counts.kinds || []).map((k) => h('tr', { 'data-test': 'kind-count-row', 'data-kind': k.kind },
      h('td', {}, h('a', { href: `#/jobs${qs({ ...f, kind: k.kind })}`, class: 'mono' }, k.kind)),
      [open, ['succeeded'], ['failed'], ['cancelled']].map((states) => h('td', { class: 'num' }, number(sum(k, states))))));
    replace(kindCounts, rows.length ? h('details', { class: 'kind-counts' }, h('summary', {}, `By kind (${rows.length})`),
      table(['Kind', 'Open', 'Succeeded', 'Failed', 'Cancelled'], rows, { class: 'compact' })) : null);
  }

  const chips = [];
  if (f.parent) chips.push(h('a', { class: 'chip', href: `#/jobs${qs({ ...f, parent: '' })}`, title: 'Show all jobs, not only these children' }, `children of ${shortId(f.parent)} ×`));

  replace(view,
    h('div', { class: 'page-head' },
      h('h1', { tabindex: -1 }, 'Jobs'),
      h('label', { class: 'toggle', for: 'live', title: cursor ? 'Live refresh is for the first page' : 'Refresh the first page every 5 s' }, liveBox, ' Live'),
      updated),
    form,
    // The operator reading a tenant's jobs reads only: bulk actions stay the tenant's.
    session.reading ? null : bulkBar({
      filter: () => Object.fromEntries(FILTERS.map((k) => [k, f[k]]).filter(([, v]) => v)),
      describe: () => FILTERS.filter((k) => f[k]).map((k) => `${k.replace('_', ' ')} ${k === 'parent' ? shortId(f[k]) : f[k]}`).join(', '),
      reload: () => load(),
      signal,
    }),
    countsBar, kindCounts,
    chips.length ? h('p', {}, chips) : null,
    h('div', { class: 'card flush' }, h('div', { class: 'table-wrap' }, tableEl), status,
      h('div', { class: 'pager' },
        cursor ? h('a', { class: 'button subtle', href: `#/jobs${qs(f)}`, 'data-test': 'first-page' }, '← First page') : null,
        next)));

  async function load() {
    const [page, counts] = await Promise.all([
      get(`/v1/jobs${qs({ ...f, limit: PAGE, cursor })}`, { signal }),
      get(`/v1/jobs/counts${f.kind ? qs({ kind: f.kind }) : ''}`, { signal }),
    ]);
    paintCounts(counts);
    let jobs = page.jobs || [];
    replace(tbody, jobs.map((j) => jobRow(j)));
    nextCursor = page.next_cursor ?? null;
    next.disabled = nextCursor === null;
    replace(status, jobs.length ? null : empty('No jobs match these filters.', { 'data-test': 'jobs-empty' }));
    updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
  }
  await load();
  if (!cursor) every(5000, () => (liveBox.checked && !document.hidden ? load() : null), signal);
}
