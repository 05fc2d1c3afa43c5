// #/queues: queue depth by kind and priority, steps running over the last hour (an inline
// SVG chart), the dead letters with a bulk retry, and the operations audit trail.

import { get, post, qs, kinds } from './api.js';
import {
  h, s, replace, badge, timeEl, mono, table, empty, every, reportError, field, select,
  fromLocalInput, toLocalInput, fmtNum, fmtAbs, parseTime, sleep, section, shortId,
} from './ui.js';
import { jobRow, JOB_HEADERS } from './jobs.js';

const DL_PAGE = 50;

export async function renderQueues(view, ctx) {
  ctx.title('Queues');
  const { signal } = ctx;
  const depthBox = h('div');
  const chartBox = h('div');
  const deadBox = h('section', { class: 'card', 'data-test': 'dead-letters-section', 'aria-labelledby': 'dl-h' });
  const opsBox = h('div');
  const updated = h('span', { class: 'muted small' });
  replace(view,
    h('div', { class: 'page-head' }, h('h1', { tabindex: -1 }, 'Queues'), updated),
    h('div', { class: 'grid-queues' }, depthBox, chartBox), deadBox, opsBox);

  async function loadQueues() {
    const q = await get('/v1/queues', { signal });
    replace(depthBox, depthCard(q.depth || []));
    replace(chartBox, chartCard(q.running_over_time || []));
    updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
  }

  // ---- operations (the audit trail: a page at a time, filtered) ----
  const { query } = ctx;
  const opsFilter = {
    action: query.get('ops_action') || '', actor: query.get('ops_actor') || '',
    since: query.get('ops_since') || '', until: query.get('ops_until') || '',
  };
  let ops = [];
  let opsNext = null;
  const watching = new Set();
  async function loadOps(older = false) {
    const params = { limit: 50, ...opsFilter, cursor: older ? opsNext : null };
    const body = await get(`/v1/operations${qs(params)}`, { signal });
    ops = older ? [...ops, ...(body.operations || [])] : (body.operations || []);
    opsNext = body.next_cursor || null;
    paintOps();
  }
  const ACTIONS = ['cancel-jobs', 'retry-jobs', 'retry-dead-letters', 'operator-read', 'token-minted', 'token-revoked', 'operator-token-use'];
  const opsAction = select([['', 'Any entry'], ...ACTIONS.map((a) => [a, a])], opsFilter.action, { 'data-test': 'ops-action' });
  const opsActor = h('input', { type: 'text', 'data-test': 'ops-actor', value: opsFilter.actor, placeholder: 'e.g. operator', spellcheck: 'false' });
  const opsSince = h('input', { type: 'datetime-local', 'data-test': 'ops-since', value: toLocalInput(opsFilter.since) });
  const opsUntil = h('input', { type: 'datetime-local', 'data-test': 'ops-until', value: toLocalInput(opsFilter.until) });
  const opsForm = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the audit trail', onsubmit: (e) => {
    e.preventDefault();
    ctx.go('/queues', {
      ops_action: opsAction.value, ops_actor: opsActor.value.trim(),
      ops_since: fromLocalInput(opsSince.value), ops_until: fromLocalInput(opsUntil.value),
    });
  } },
  field('Entry', opsAction), field('By', opsActor), field('Since', opsSince), field('Until', opsUntil),
  h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'button', 'data-test': 'ops-apply' }, 'Apply'),
    h('a', { class: 'button subtle', href: '#/queues' }, 'Reset')));
  function paintOps() {
    const older = h('button', { type: 'button', class: 'button', 'data-test': 'ops-older', disabled: !opsNext,
      onclick: () => loadOps(true).catch(reportError) }, opsNext ? 'Load older entries' : 'No older entries');
    replace(opsBox, section('Operations', { 'data-test': 'operations-section' },
      h('p', { class: 'muted small' }, 'The audit trail, newest first: bulk actions and who asked for them, the operator\'s reads, tokens it minted or revoked for you, and each use of one it minted.'),
      opsForm,
      ops.length ? table(['Operation', 'Action', 'Filter', 'State', 'Matched', 'Done', 'Failed', 'By', 'Started', 'Finished'],
        ops.map((o) => h('tr', { 'data-test': 'operation-row', 'data-id': o.id, 'data-state': o.state, 'data-action': o.action },
          h('td', {}, mono(shortId(o.id), { title: o.id })), h('td', {}, mono(o.action)),
          h('td', {}, filterText(o.filter)), h('td', {}, badge(o.state)),
          h('td', { class: 'num' }, fmtNum(o.matched)), h('td', { class: 'num' }, fmtNum(o.done ?? o.retried)),
          h('td', { class: ['num', o.failed ? 'warn-text' : null] }, fmtNum(o.failed)),
          h('td', {}, mono(o.actor || '—')), h('td', {}, timeEl(o.created_at)), h('td', {}, timeEl(o.finished_at)))),
      { 'data-test': 'operations' }) : empty('No entries match.', { 'data-test': 'operations' }),
      h('div', { class: 'table-status' }, older)));
  }
  async function watch(op) {
    if (watching.has(op.id)) return;
    watching.add(op.id);
    let current = op;
    while (current.state === 'running' && !signal.aborted) {
      await sleep(1000, signal);
      if (signal.aborted) return;
      try { current = await get(`/v1/operations/${encodeURIComponent(op.id)}`, { signal }); } catch (e) { reportError(e); break; }
      ops = [current, ...ops.filter((o) => o.id !== current.id)];
      paintOps();
    }
    watching.delete(op.id);
    if (!signal.aborted) { dead.load(); }
  }

  const dead = deadLetters(deadBox, ctx, (op) => {
    ops = [op, ...ops.filter((o) => o.id !== op.id)];
    paintOps();
    watch(op);
  });

  await Promise.all([
    loadQueues().catch(reportError),
    dead.load().catch(reportError),
    loadOps().catch(reportError),
  ]);
  for (const op of ops) if (op.state === 'running') watch(op);
  every(10_000, () => (document.hidden ? null : loadQueues()), signal);
}

function filterText(filter) {
  const parts = Object.entries(filter || {}).filter(([, v]) => v !== null && v !== undefined && v !== '');
  if (!parts.length) return h('span', { class: 'muted' }, 'every dead letter');
  return parts.map(([k, v]) => mono(`${k}=${k.endsWith('_before') ? fmtAbs(v) : v}`, { class: 'mono chip' }));
}

function depthCard(depth) {
  const cols = ['ready', 'delayed', 'blocked', 'waiting', 'running'];
  const total = Object.fromEntries(cols.map((c) => [c, depth.reduce((n, d) => n + (d[c] || 0), 0)]));
  const rows = depth.map((d) => h('tr', { 'data-test': 'depth-row', 'data-kind': d.kind, 'data-priority': d.priority },
    h('td', {}, h('a', { href: `#/kinds/${encodeURIComponent(d.kind)}`, class: 'mono' }, d.kind)), h('td', {}, d.priority),
    cols.map((c) => h('td', { class: ['num', d[c] ? null : 'muted'] }, fmtNum(d[c] || 0)))));
  if (depth.length > 1) rows.push(h('tr', { class: 'total' }, h('th', { scope: 'row', colspan: 2 }, 'All'), cols.map((c) => h('td', { class: 'num' }, fmtNum(total[c])))));
  return section('Depth', { 'data-test': 'depth' },
    h('p', { class: 'muted small' }, 'Ready: may run now · delayed: not yet due · blocked: behind a lease key · waiting: for children or a signal.'),
    depth.length ? table(['Kind', 'Priority', ...cols.map((c) => c[0].toUpperCase() + c.slice(1))], rows, { 'data-test': 'depth-table', class: 'compact' })
      : empty('Nothing queued or running.', { 'data-test': 'depth-table' }));
}

/** Steps running over time as a small line chart; no library, just SVG. */
export function runningChart(samples) {
  const W = 560; const H = 160; const L = 40; const R = 12; const T = 12; const B = 26;
  const points = samples.map((p) => [parseTime(p.at), Number(p.running) || 0]).filter(([t]) => !Number.isNaN(t)).sort((a, b) => a[0] - b[0]);
  const now = points.length ? Math.max(points[points.length - 1][0], Date.now()) : Date.now();
  const t0 = now - 3600_000;
  const peak = Math.max(1, ...points.map((p) => p[1]));
  const step = niceStep(peak);
  const top = Math.ceil(peak / step) * step;
  const x = (t) => L + ((t - t0) / (now - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const last = points.length ? points[points.length - 1][1] : 0;
  const label = points.length
    ? `Steps running over the last hour: ${last} now, peak ${Math.max(...points.map((p) => p[1]))}.`
    : 'Steps running over the last hour: no samples yet.';
  const grid = [];
  for (let v = 0; v <= top; v += step) {
    grid.push(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }), s('text', { x: L - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, fmtNum(v)));
  }
  for (const m of [60, 45, 30, 15, 0]) {
    grid.push(s('text', { x: x(now - m * 60_000), y: H - 8, class: 'axis', 'text-anchor': m === 60 ? 'start' : m === 0 ? 'end' : 'middle' }, m ? `−${m} min` : 'now'));
  }
  const inWindow = points.filter(([t]) => t >= t0);
  const line = inWindow.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  const area = inWindow.length ? `M${x(inWindow[0][0]).toFixed(1)},${y(0)} L${line.replaceAll(' ', ' L')} L${x(inWindow[inWindow.length - 1][0]).toFixed(1)},${y(0)} Z` : '';
  return s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': label, 'data-test': 'running-chart', 'data-points': inWindow.length },
    s('title', {}, label), grid,
    area ? s('path', { d: area, class: 'area' }) : null,
    line ? s('polyline', { points: line, class: 'line' }) : null,
    inWindow.length ? s('circle', { cx: x(inWindow[inWindow.length - 1][0]), cy: y(last), r: 3.5, class: 'dot' }) : null,
    !inWindow.length ? s('text', { x: (L + W - R) / 2, y: (T + H - B) / 2, class: 'axis', 'text-anchor': 'middle' }, 'no samples yet') : null);
}

function niceStep(peak) {
  const raw = peak / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return Math.max(1, (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag);
}

function chartCard(samples) {
  const last = samples.length ? samples[samples.length - 1] : null;
  return section('Running', { 'data-test': 'running' },
    h('p', { class: 'muted small' }, last ? ['Steps running over the last hour, sampled every 10 s: ', h('strong', { 'data-test': 'running-now' }, fmtNum(last.running)), ' in the latest sample (', timeEl(last.at), ').'] : 'Steps running over the last hour, sampled every 10 s.'),
    runningChart(samples));
}

// ---- dead letters ------------------------------------------------------------------------

function deadLetters(box, ctx, onOperation) {
  const { signal, query } = ctx;
  const f = { kind: query.get('dl_kind') || '', failure_code: query.get('dl_code') || '', failed_before: query.get('dl_before') || '' };
  const cursor = query.get('dl_cursor') || '';
  const kindSel = select([['', 'Any kind']], f.kind, { 'data-test': 'dl-kind' });
  const code = h('input', { type: 'text', 'data-test': 'dl-code', value: f.failure_code, placeholder: 'e.g. card-declined', spellcheck: 'false' });
  const before = h('input', { type: 'datetime-local', 'data-test': 'dl-before', value: toLocalInput(f.failed_before) });
  kinds(signal).then((list) => {
    for (const k of list.kinds || []) if (k.kind !== f.kind) kindSel.append(h('option', { value: k.kind }, k.kind));
  }, reportError);
  const params = () => ({
    dl_kind: kindSel.value, dl_code: code.value.trim(), dl_before: fromLocalInput(before.value),
  });
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter dead letters', onsubmit: (e) => {
    e.preventDefault();
    ctx.go('/queues', params());
  } },
  field('Kind', kindSel), field('Failure code', code), field('Failed before', before),
  h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'button', 'data-test': 'dl-apply' }, 'Apply'),
    h('a', { class: 'button subtle', href: '#/queues' }, 'Reset')));
  const tbody = h('tbody');
  const status = h('div', { class: 'table-status' });
  const next = h('button', { type: 'button', class: 'button', 'data-test': 'dl-next-page', disabled: true }, 'Next page →');
  let nextCursor = null;
  next.addEventListener('click', () => ctx.go('/queues', { ...params(), dl_cursor: nextCursor }));
  const matching = [f.kind && `kind ${f.kind}`, f.failure_code && `code ${f.failure_code}`, f.failed_before && `failed before ${fmtAbs(f.failed_before)}`].filter(Boolean);
  const bulk = h('button', { type: 'button', class: 'button primary', 'data-test': 'bulk-retry' },
    matching.length ? `Retry all matching (${matching.join(', ')})` : 'Retry all dead letters');
  const bulkNote = h('span', { class: 'muted small', 'aria-live': 'polite', 'data-test': 'bulk-retry-result' });
  const filterBody = () => {
    const body = {};
    if (f.kind) body.kind = f.kind;
    if (f.failure_code) body.failure_code = f.failure_code;
    if (f.failed_before) body.failed_before = f.failed_before;
    return body;
  };
  // One click never retries: the count comes first, and the retry starts only from the
  // dialog that shows it.
  const confirmText = h('p', { 'data-test': 'bulk-retry-count' });
  const confirmButton = h('button', { type: 'submit', class: 'button primary', 'data-test': 'bulk-retry-confirm' }, 'Retry them');
  const dialog = h('dialog', { 'data-test': 'bulk-retry-dialog', 'aria-labelledby': 'bulk-h' },
    h('form', { method: 'dialog', onsubmit: async (e) => {
      e.preventDefault();
      confirmButton.disabled = true;
      try {
        const answer = await post('/v1/dead-letters/retry', filterBody(), { signal });
        const op = answer.operation || answer;
        bulkNote.textContent = `Operation ${shortId(op.id)} started: ${fmtNum(op.matched ?? 0)} matched so far.`;
        onOperation(op);
      } catch (err) { reportError(err); } finally { confirmButton.disabled = false; dialog.close(); }
    } },
    h('h2', { id: 'bulk-h' }, 'Retry dead letters?'),
    confirmText,
    h('p', { class: 'muted small' }, 'Each is retried as a new job linked to the failed one, in the background; the operation below shows how it goes.'),
    h('div', { class: 'dialog-buttons' },
      h('button', { type: 'button', class: 'button subtle', 'data-test': 'bulk-retry-dismiss', onclick: () => dialog.close() }, 'Keep them'),
      confirmButton)));
  bulk.addEventListener('click', async () => {
    bulk.disabled = true;
    try {
      const count = await get(`/v1/dead-letters/count${qs(filterBody())}`, { signal });
      if (!count.matching) {
        bulkNote.textContent = 'No dead letters match: nothing to retry.';
        return;
      }
      const n = `${fmtNum(count.matching)}${count.capped ? ' or more' : ''}`;
      replace(confirmText, `${n} dead letter${count.matching === 1 && !count.capped ? '' : 's'}${matching.length ? ` matching ${matching.join(', ')}` : ''} will be retried.`);
      confirmButton.textContent = `Retry ${n}`;
      dialog.showModal();
      // The safe choice has the focus: Enter on an opened dialog never acts.
      dialog.querySelector('[data-test="bulk-retry-dismiss"]').focus();
    } catch (e) { reportError(e); } finally { bulk.disabled = false; }
  });

  replace(box,
    h('div', { class: 'section-head' }, h('h2', { id: 'dl-h' }, 'Dead letters'),
      h('span', { class: 'muted small' }, 'Failed jobs not yet retried.')),
    form,
    h('div', { class: 'bulk' }, bulk, bulkNote, dialog),
    h('div', { class: 'table-wrap' }, h('table', { 'data-test': 'dead-letters' },
      h('thead', {}, h('tr', {}, JOB_HEADERS.map((x) => h('th', { scope: 'col' }, x)))), tbody)),
    status,
    h('div', { class: 'pager' },
      cursor ? h('a', { class: 'button subtle', href: `#/queues${qs({ dl_kind: f.kind, dl_code: f.failure_code, dl_before: f.failed_before })}` }, '← First page') : null,
      next));

  return {
    async load() {
      const page = await get(`/v1/dead-letters${qs({ kind: f.kind, failure_code: f.failure_code, failed_before: f.failed_before, limit: DL_PAGE, cursor })}`, { signal });
      // The failure code and time are also applied here, for a host that filters by kind only.
      const jobs = (page.jobs || []).filter((j) => (!f.failure_code || j.failure_code === f.failure_code)
        && (!f.failed_before || !j.settled_at || parseTime(j.settled_at) < parseTime(f.failed_before)));
      replace(tbody, jobs.map((j) => jobRow(j, 'dead-letter-row')));
      nextCursor = page.next_cursor ?? null;
      next.disabled = nextCursor === null;
      replace(status, jobs.length ? null : empty('No dead letters match.', { 'data-test': 'dead-letters-empty' }));
    },
  };
}
