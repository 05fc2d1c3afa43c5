// #/jobs/<id>: one job whole — header, run control, failure, step timeline, data, logs,
// history, outbound requests — kept live by GET /v1/jobs/{id}/events while it is not final.

import { get, post, stream, enc, ApiError, session } from './api.js';
import {
  h, replace, badge, progressBar, timeEl, jobLink, mono, table, empty, reportError, jsonBlock,
  collapsible, fmtDuration, fmtBytes, parseTime, isFinal, shortId, sleep, select, every,
  field, describeError, resultBox,
} from './ui.js';
import { jobRow, JOB_HEADERS } from './jobs.js';

const ACTIONS = [
  ['cancel', 'Cancel…'],
  ['pause', 'Pause'],
  ['resume', 'Resume'],
  ['restart', 'Restart'],
  ['retry', 'Retry'],
  ['retry-current', 'Retry on current version'],
];

/** Where each action posts: a retry on the current version is a retry with a query. */
const ACTION_PATHS = { 'retry-current': 'retry?on_current=true' };

/**
 * What run control allows now: the job's own `actions` when the API sends them, else the
 * same rules the job's machine applies (the host refuses anything else anyway).
 */
export function actionsOf(job) {
  if (job.actions) return job.actions;
  const final = isFinal(job.state);
  const no = (reason) => ({ allowed: false, reason });
  const yes = { allowed: true };
  const finalReason = 'the job is final';
  return {
    cancel: final ? no(finalReason) : job.cancel_requested ? no('a cancellation is already requested') : yes,
    pause: final ? no(finalReason) : job.state === 'paused' ? no('the job is already paused')
      : job.cancel_requested ? no('the job is being cancelled') : job.pause_requested ? no('a pause is already requested') : yes,
    resume: final ? no(finalReason) : (job.state === 'paused' || job.pause_requested) ? yes : no('the job is not paused'),
    restart: final ? no(finalReason) : !job.started_at ? no('the job has not started')
      : job.restart_requested ? no('a restart is already requested') : yes,
    retry: !(job.state === 'failed' || job.state === 'cancelled') ? no('only a failed or cancelled job can be retried')
      : job.successor ? no('already retried') : yes,
  };
}

function attemptMs(a, now) {
  if (typeof a.duration_ms === 'number') return a.duration_ms;
  const start = parseTime(a.started_at);
  const end = a.ended_at ? parseTime(a.ended_at) : now;
  return Number.isNaN(start) || Number.isNaN(end) ? NaN : Math.max(0, end - start);
}

export async function renderJob(view, ctx, id) {
  const { signal } = ctx;
  ctx.title(`Job ${shortId(id)}`);
  const open = new Set(['history', 'timeline']);
  const st = { job: null, seen: new Set(), live: 'loading', children: null, childrenAt: 0 };

  const head = h('div', { class: 'job-head' });
  const actions = h('div', { class: 'card actions-card' });
  const failure = h('div');
  const timelineBox = h('div');
  const related = h('div');
  const workflowBox = h('div');
  const dataBox = h('div');
  const logsBox = h('section', { class: 'card', 'data-test': 'logs', 'aria-labelledby': 'logs-h' });
  const historyBox = h('div');
  const outboundBox = h('div');
  const dialog = cancelDialog();

  replace(view, head, actions, failure, workflowBox, timelineBox, related, dataBox, logsBox, historyBox, outboundBox, dialog.el);

  async function fetchJob() {
    st.job = await get(`/v1/jobs/${enc(id)}`, { signal });
    st.seen = new Set((st.job.history || []).map(entryKey));
    paint();
  }

  let refetchTimer = null;
  let refetching = false;
  /** One refetch soon for a burst of live events (never more than one at a time). */
  function refetchSoon(ms = 700) {
    if (refetchTimer || signal.aborted) return;
    refetchTimer = setTimeout(async () => {
      refetchTimer = null;
      if (refetching) return refetchSoon(ms);
      refetching = true;
      try { await fetchJob(); } catch (e) { reportError(e); } finally { refetching = false; }
    }, ms);
  }
  signal.addEventListener('abort', () => clearTimeout(refetchTimer), { once: true });

  function paint() {
    const job = st.job;
    ctx.title(`Job ${shortId(job.id)} · ${job.state}`);
    paintHead();
    paintActions();
    replace(failure, job.failure ? failureCard(job.failure) : null);
    replace(timelineBox, timeline(job, open));
    paintWorkflow();
    paintRelated();
    replace(dataBox, dataCard(job, open));
    replace(historyBox, job.record === 'lean' ? leanHistoryCard() : historyCard(job.history || [], open));
    replace(outboundBox, job.outbound && job.outbound.length ? outboundCard(job.outbound, open) : null);
    logs.sync(job);
  }

  function paintHead() {
    const job = st.job;
    const live = { live: 'live', polling: 'polling every 5 s', reconnecting: 'reconnecting…', final: 'final', loading: '' }[st.live];
    const rows = [
      ['Kind', h('a', { href: `#/kinds/${enc(job.kind)}`, class: 'mono' }, `${job.kind}@${job.kind_version}`)],
      ['State', h('span', {}, badge(job.state, { 'data-test': 'job-state' }), live ? h('span', { class: `live-dot ${st.live}`, 'data-test': 'job-live' }, live) : null)],
      ['Progress', progressBar(job.progress, { 'data-test': 'job-progress' })],
      ['Priority', job.priority],
      job.record === 'lean' ? ['Record', h('span', { 'data-test': 'job-record', title: 'the job row alone: no step or history rows' }, 'lean')] : null,
      ['Pass', String(job.pass ?? 1)],
      ['Created', timeEl(job.created_at, { both: true })],
      ['Runs at', timeEl(job.run_at, { both: true })],
      ['Started', timeEl(job.started_at, { both: true })],
      ['Settled', timeEl(job.settled_at, { both: true })],
      job.started_at ? [job.settled_at ? 'Took' : 'Running for', fmtDuration((job.settled_at ? parseTime(job.settled_at) : Date.now()) - parseTime(job.started_at))] : null,
      ['Claimed', job.claimed ? 'yes, a host holds it now' : 'no'],
      job.idempotency_key ? ['Idempotency key', mono(job.idempotency_key)] : null,
      job.lease_keys && job.lease_keys.length ? ['Lease keys', job.lease_keys.map((k) => mono(k, { class: 'mono chip' }))] : null,
      job.pending_signals && Object.keys(job.pending_signals).length
        ? ['Pending signals', Object.entries(job.pending_signals).map(([n, c]) => mono(`${n} ×${c}`, { class: 'mono chip' }))] : null,
      job.waiting_for ? ['Waiting for', waitingText(job.waiting_for)] : null,
      job.predecessor ? ['Retries', jobLink(job.predecessor, { 'data-test': 'predecessor-link' })] : null,
      job.successor ? ['Retried as', jobLink(job.successor, { 'data-test': 'successor-link' })] : null,
      job.parent ? ['Parent', jobLink(job.parent, { 'data-test': 'parent-link' })] : null,
    ].filter(Boolean);
    const requests = [
      job.pause_requested ? 'A pause waits for the step in flight.' : null,
      job.cancel_requested ? `A cancellation by ${job.cancel_requested.actor} waits for the step in flight: “${job.cancel_requested.reason}”.` : null,
      job.restart_requested ? 'A restart waits for the step boundary.' : null,
    ].filter(Boolean);
    replace(head,
      h('div', { class: 'page-head' },
        h('h1', { tabindex: -1 }, 'Job ', h('code', { class: 'mono', 'data-test': 'job-id' }, job.id)),
        h('button', { type: 'button', class: 'button subtle small', title: 'Copy the job id', onclick: () => navigator.clipboard?.writeText(job.id) }, 'Copy id')),
      h('div', { class: 'card' },
        h('dl', { class: 'facts' }, rows.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))),
        requests.map((r) => h('p', { class: 'note', 'data-test': 'job-request' }, r))));
  }

  function paintActions() {
    const job = st.job;
    const allowed = actionsOf(job);
    replace(actions,
      h('h2', { class: 'sr-only' }, 'Run control'),
      h('div', { class: 'actions' }, ACTIONS.map(([name, label]) => {
        const a = allowed[name === 'retry-current' ? 'retry' : name] || { allowed: false, reason: 'not offered' };
        const button = h('button', {
          type: 'button', class: ['button', name === 'cancel' ? 'danger' : null], 'data-test': `action-${name}`,
          disabled: !a.allowed,
          title: a.allowed ? (name === 'retry-current' ? 'Runs the retry on the kind\'s current version, with its steps' : null) : a.reason,
          'aria-describedby': a.allowed ? null : `why-${name}`,
          onclick: () => act(name, button),
        }, label);
        return h('div', { class: 'action' }, button,
          a.allowed ? null : h('span', { class: 'why', id: `why-${name}`, 'data-test': `action-${name}-reason` }, a.reason));
      })));
  }

  async function act(name, button) {
    if (name === 'cancel') return dialog.show();
    button.disabled = true;
    try {
      const answer = await post(`/v1/jobs/${enc(id)}/${ACTION_PATHS[name] || name}`, {}, { signal });
      if (name.startsWith('retry')) { ctx.go(`/jobs/${answer.id}`); return; }
      await fetchJob();
    } catch (e) {
      reportError(e);
      button.disabled = false;
    }
  }

  function cancelDialog() {
    const reason = h('textarea', { id: 'cancel-reason', 'data-test': 'cancel-reason', rows: 3, required: true, placeholder: 'e.g. submitted twice by mistake' });
    const invalid = h('p', { class: 'field-error', hidden: true, 'data-test': 'cancel-invalid' }, 'Say why: the reason is kept in the job\'s history.');
    reason.addEventListener('input', () => { if (reason.value.trim()) invalid.hidden = true; });
    const confirm = h('button', { type: 'submit', class: 'button danger', 'data-test': 'cancel-confirm' }, 'Cancel the job');
    const el = h('dialog', { 'data-test': 'cancel-dialog', 'aria-labelledby': 'cancel-h' },
      h('form', { method: 'dialog', novalidate: true, onsubmit: async (e) => {
        e.preventDefault();
        const text = reason.value.trim();
        invalid.hidden = Boolean(text);
        if (!text) return reason.focus();
        confirm.disabled = true;
        try {
          await post(`/v1/jobs/${enc(id)}/cancel`, { reason: text }, { signal });
          el.close();
          await fetchJob();
        } catch (err) {
          el.close();
          reportError(err);
        } finally {
          confirm.disabled = false;
        }
      } },
      h('h2', { id: 'cancel-h' }, 'Cancel this job?'),
      h('p', { class: 'muted' }, 'A step in flight finishes first; then the job is cancelled for good (a cancelled job can be retried as a new one).'),
      h('label', { for: 'cancel-reason', class: 'field-label' }, 'Reason'),
      reason, invalid,
      h('div', { class: 'dialog-buttons' },
        h('button', { type: 'button', class: 'button subtle', 'data-test': 'cancel-dismiss', onclick: () => el.close() }, 'Keep it'),
        confirm)));
    return { el, show: () => { invalid.hidden = true; el.showModal(); reason.focus(); } };
  }

  /**
   * What the job waits for (a join of its children, or a signal and until when), the
   * signals it received and those pending, and a form to send one: shown for a job in a
   * workflow (waiting, with children, a parent or signals).
   */
  const signalName = h('input', { type: 'text', name: 'signal', 'data-test': 'signal-name', required: true, spellcheck: 'false', pattern: '[A-Za-z0-9._:\\-]{1,128}' });
  const signalBody = h('textarea', { name: 'body', 'data-test': 'signal-body', rows: 2, spellcheck: 'false', class: 'mono' }, '{}');
  const [signalResult, saySignal] = resultBox('signal-result');
  const signalForm = h('form', { class: 'submit-form', 'data-test': 'signal-form', onsubmit: async (e) => {
    e.preventDefault();
    let body;
    try { body = JSON.parse(signalBody.value || 'null'); } catch (err) { return saySignal('failed', `The body is not JSON: ${err.message}`); }
    try {
      await post(`/v1/jobs/${enc(id)}/signals/${enc(signalName.value.trim())}`, body, { signal });
      saySignal('ready', 'Sent ', mono(signalName.value.trim()), '.');
      await fetchJob();
    } catch (err) {
      if (err.name !== 'AbortError') saySignal('failed', 'Refused: ', describeError(err));
    }
  } },
  field('Signal', signalName), field('Body (JSON)', signalBody),
  h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'button', 'data-test': 'signal-send' }, 'Send signal')));

  function paintWorkflow() {
    const job = st.job;
    const w = job.waiting_for;
    const received = (job.history || []).filter((e) => e.event === 'signal_received');
    const pending = Object.entries(job.pending_signals || {});
    if (!w && !received.length && !pending.length && !job.children && !job.parent) return replace(workflowBox);
    if (w && w.for === 'signal' && !signalName.value) signalName.value = w.name;
    const rows = [
      ['Waits for', w ? waitDescription(w) : h('span', { class: 'muted' }, 'nothing now')],
      ['Signals received', job.record === 'lean' ? h('span', { class: 'muted' }, 'not kept (a lean record keeps no history)') : received.length
        ? h('ul', { class: 'plain' }, received.map((e) => h('li', { 'data-test': 'signal-received' }, mono(e.name), ' ', timeEl(e.at))))
        : h('span', { class: 'muted' }, 'none')],
      ['Pending signals', pending.length
        ? pending.map(([n, c]) => mono(`${n} ×${c}`, { class: 'mono chip', 'data-test': 'signal-pending' }))
        : h('span', { class: 'muted' }, 'none')],
    ];
    replace(workflowBox, h('section', { class: 'card', 'data-test': 'workflow', 'aria-labelledby': 'workflow-h' },
      h('h2', { id: 'workflow-h' }, 'Workflow'),
      h('dl', { class: 'facts' }, rows.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))),
      isFinal(job.state) || session.reading ? null : h('div', {}, signalForm, signalResult)));
  }

  /** The children's tree: which rows are open, kept across refreshes. */
  const tree = { signal, opened: new Set() };

  function paintRelated() {
    const job = st.job;
    if (!job.children) return replace(related);
    const now = Date.now();
    if (!st.children || (!isFinal(job.state) && now - st.childrenAt > 5000)) {
      st.childrenAt = now;
      const url = new URL(job.children, location.origin);
      url.searchParams.set('limit', '100');
      get(url.pathname + url.search, { signal }).then((page) => { st.children = page; paintChildren(); }).catch(reportError);
    }
    paintChildren();
  }

  function paintChildren() {
    const job = st.job;
    const page = st.children;
    const body = !page ? h('p', { class: 'muted' }, 'Loading children…')
      : !page.jobs.length ? empty('No children yet.')
        : table(['', ...JOB_HEADERS], page.jobs.map((j) => treeRow(j, 0, tree)));
    replace(related, h('section', { class: 'card', 'data-test': 'children' },
      h('h2', {}, 'Children', page ? h('span', { class: 'count' }, page.next_cursor !== null ? `${page.jobs.length}+` : String(page.jobs.length)) : null),
      body,
      page && page.next_cursor !== null ? h('p', {}, h('a', { href: `#/jobs?parent=${enc(job.id)}` }, 'All children in the jobs list →')) : null));
  }

  // ---- logs ----------------------------------------------------------------------------
  const logs = logsPanel(logsBox, id, signal);

  // ---- live ----------------------------------------------------------------------------
  async function follow() {
    let failures = 0;
    while (!signal.aborted && st.job && !isFinal(st.job.state)) {
      let ended = false;
      const local = new AbortController();
      const stop = () => local.abort();
      signal.addEventListener('abort', stop, { once: true });
      try {
        st.live = 'live';
        paintHead();
        await stream(`/v1/jobs/${enc(id)}/events`, (type, data) => {
          if (type === 'job' || type === 'history') failures = 0;
          if (type === 'job') {
            const update = JSON.parse(data);
            const changed = update.state !== st.job.state;
            const moved = update.progress !== st.job.progress;
            Object.assign(st.job, update);
            paintHead();
            if (changed) { paintActions(); refetchSoon(0); } else if (moved) refetchSoon(1500);
          } else if (type === 'history') {
            // The stream sends every entry from the first: only new ones change the page.
            const entry = JSON.parse(data);
            const key = entryKey(entry);
            if (!st.seen.has(key)) {
              st.seen.add(key);
              st.job.history = st.job.history || [];
              st.job.history.push(entry);
              replace(historyBox, historyCard(st.job.history, open));
              refetchSoon();
            }
          } else if (type === 'end') {
            ended = true;
            local.abort();
          }
        }, local.signal);
      } catch (e) {
        if (signal.aborted) return;
        if (!ended) {
          if ((e instanceof ApiError && [404, 405, 501].includes(e.status)) || e.code === 'not-a-stream') return poll();
          if (e instanceof ApiError && e.status === 401) return;
          failures += 1;
        }
      } finally {
        signal.removeEventListener('abort', stop);
      }
      if (signal.aborted) return;
      try { await fetchJob(); } catch (e) { reportError(e); }
      if (isFinal(st.job.state)) break;
      if (ended) failures += 1; // an end before the job is final: follow again, slower each time
      st.live = 'reconnecting';
      paintHead();
      await sleep(Math.min(30_000, 1000 * 2 ** Math.min(failures, 5)), signal);
    }
    if (!signal.aborted) { st.live = 'final'; paintHead(); }
  }

  /** Without the events stream (an older host): read the job every 5 s until it is final. */
  function poll() {
    st.live = 'polling';
    paintHead();
    const local = new AbortController();
    signal.addEventListener('abort', () => local.abort(), { once: true });
    every(5000, async () => {
      await fetchJob();
      if (isFinal(st.job.state)) { local.abort(); st.live = 'final'; paintHead(); }
    }, local.signal);
  }

  try {
    await fetchJob();
  } catch (e) {
    // An id `spindle.submit` answered: the API answers its refusal (or 404 while it is
    // queued) for the job; the submission itself says which, and why.
    const submission = e instanceof ApiError
      ? await get(`/v1/submissions/${enc(id)}`, { signal }).catch(() => null) : null;
    if (!submission) throw e;
    renderSubmission(view, ctx, submission);
    return;
  }
  if (isFinal(st.job.state)) { st.live = 'final'; paintHead(); } else follow();
}

/**
 * A submission made inside an application's own PostgreSQL transaction that made no job:
 * refused (its code, message and violations; nothing else was written) or still queued
 * (read again every 2 s until a host admits it, then its job).
 */
function renderSubmission(view, ctx, submission) {
  ctx.title(`Submission ${shortId(submission.id)}`);
  const violations = submission.violations || [];
  replace(view,
    h('section', { class: 'card', 'data-test': 'submission', 'data-state': submission.state },
      h('h2', {}, 'Submission from ', mono('spindle.submit'), ' ', badge(submission.state, { 'data-test': 'submission-state' })),
      h('dl', { class: 'facts' }, [
        ['Kind', h('bdi', {}, submission.kind)],
        ['Submitted by role', mono(submission.submitted_by)],
        ['Submitted', timeEl(submission.submitted_at)],
      ].map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))),
      submission.state === 'refused'
        ? h('div', { class: 'failure', 'data-test': 'submission-refusal' },
          h('p', {}, mono(submission.code || ''), ': ', h('bdi', {}, submission.message || '')),
          h('p', { class: 'muted' }, 'Refused when a host admitted it: no job was made and nothing else was written.'),
          violations.length
            ? table(['Where in the input', 'What is wrong'], violations.map((v) => h('tr', { 'data-test': 'violation' },
              h('td', {}, mono(v.pointer || '(the input)')), h('td', {}, h('bdi', {}, v.message)))))
            : null)
        : h('p', { class: 'muted' }, 'Committed by its application; waiting for a host to admit it.')));
  if (submission.state === 'queued') {
    const local = new AbortController();
    ctx.signal.addEventListener('abort', () => local.abort(), { once: true });
    every(2000, async () => {
      const now = await get(`/v1/submissions/${enc(submission.id)}`, { signal: local.signal });
      if (now.state === 'queued') return;
      local.abort();
      if (now.job) location.hash = `#/jobs/${enc(now.job)}`;
      else renderSubmission(view, ctx, now);
    }, local.signal);
  }
}

/** A history entry's identity: its `id` when it has one, else all of it. */
function entryKey(e) {
  return e.id !== undefined ? `id:${e.id}` : JSON.stringify(e);
}

/** A join or a signal wait, in words. */
function waitDescription(w) {
  if (w.for === 'children') {
    const join = w.join || {};
    const target = join.join === 'count' ? `${join.n} of ${w.total}` : join.join === 'any' ? `any 1 of ${w.total}` : `all ${w.total}`;
    return h('span', { 'data-test': 'wait-children' }, `its children: ${target} final (${w.settled} so far); then ${w.leftover === 'keep' ? 'the open ones are kept' : 'the open ones are cancelled'}`);
  }
  if (w.for === 'signal') {
    const until = typeof w.deadline === 'number' ? new Date(w.deadline / 1000).toISOString() : null;
    return h('span', { 'data-test': 'wait-signal' }, 'the signal ', mono(w.name), until ? [' until ', timeEl(until, { both: true })] : null);
  }
  return waitingText(w);
}

/**
 * A child's row with a button that opens its own children beneath it, indented: the
 * workflow as a tree, each level read when it is opened (`?parent=ID`). `opened` keeps
 * which are open across the list's refreshes.
 */
function treeRow(job, depth, ctx) {
  const row = jobRow(job, depth ? 'grandchild-row' : 'child-row');
  row.dataset.depth = String(depth);
  const toggle = h('button', { type: 'button', class: 'button subtle small', 'data-test': 'tree-toggle', 'aria-expanded': 'false', title: 'Its children' }, '▸');
  /** The rows of its children, shown beneath it (each closes its own when this closes). */
  let children = [];
  const close = () => {
    for (const r of children) { if (r.closeTree) r.closeTree(); r.remove(); }
    children = [];
  };
  row.closeTree = close;
  async function open() {
    const page = await get(`/v1/jobs?parent=${enc(job.id)}&limit=100`, { signal: ctx.signal });
    close();
    children = page.jobs.length
      ? page.jobs.map((j) => treeRow(j, depth + 1, ctx))
      : [h('tr', { class: 'sub' }, indent(h('td', { colspan: 8, class: 'muted small' }, 'no children'), depth + 2))];
    row.after(...children);
  }
  toggle.addEventListener('click', () => {
    const opening = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(opening));
    toggle.textContent = opening ? '▾' : '▸';
    if (opening) { ctx.opened.add(job.id); open().catch(reportError); } else { ctx.opened.delete(job.id); close(); }
  });
  row.prepend(indent(h('td', {}, toggle), depth));
  if (ctx.opened.has(job.id)) queueMicrotask(() => toggle.click());
  return row;
}

/** `cell`, indented for its depth in the tree. */
function indent(cell, depth) {
  cell.style.paddingLeft = `${depth * 1.2}rem`;
  return cell;
}

function waitingText(w) {
  if (w && typeof w === 'object') {
    const what = w.what || w;
    if (what.children !== undefined || what.total !== undefined) return `children of fan-out ${what.slot ?? ''} (${what.total ?? '?'} in all)`.trim();
    if (what.signal || what.name) return `the signal “${what.signal || what.name}”`;
  }
  return h('code', { class: 'mono small' }, JSON.stringify(w));
}

function failureCard(f) {
  return h('section', { class: 'card failure', 'data-test': 'job-failure', 'aria-labelledby': 'failure-h' },
    h('h2', { id: 'failure-h' }, 'Failure'),
    h('p', {}, mono(f.code, { 'data-test': 'failure-code', class: 'mono failure-code' }), f.message ? ` ${f.message}` : null),
    f.correlation ? h('p', { class: 'muted small' }, 'Host log reference: ', mono(f.correlation)) : null,
    f.guest_stderr ? h('div', {}, h('h3', {}, 'The guest\'s last stderr lines'), h('pre', { class: 'code stderr', 'data-test': 'guest-stderr' }, f.guest_stderr)) : null);
}

// ---- the step timeline -------------------------------------------------------------------

/** Remembers whether `details` is open across re-renders. */
function keep(open, key, details) {
  details.addEventListener('toggle', () => (details.open ? open.add(key) : open.delete(key)));
  return details;
}

function timeline(job, open) {
  const now = Date.now();
  const steps = job.steps || [];
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const step of steps) {
    for (const a of step.attempts || []) {
      const start = parseTime(a.started_at);
      if (Number.isNaN(start)) continue;
      t0 = Math.min(t0, start);
      t1 = Math.max(t1, start + (attemptMs(a, now) || 0));
    }
  }
  const span = Number.isFinite(t0) ? Math.max(1, t1 - t0) : 0;
  const bar = (a) => {
    const start = parseTime(a.started_at);
    const ms = attemptMs(a, now);
    if (!span || Number.isNaN(start)) return h('div', { class: 'track' });
    const left = ((start - t0) / span) * 100;
    const width = Math.max(0.6, ((ms || 0) / span) * 100);
    return h('div', { class: 'track', 'aria-hidden': 'true' },
      h('div', { class: `bar out-${a.outcome}`, style: { left: `${Math.min(left, 99.4)}%`, width: `${Math.min(width, 100 - Math.min(left, 99.4))}%` } }));
  };
  const rows = steps.map((step, i) => {
    const attempts = step.attempts || [];
    const unit = step.done !== undefined ? `${step.done}${step.total !== undefined ? ` / ${step.total}` : ''} done` : null;
    return h('li', { class: 'step', 'data-test': 'step', 'data-key': step.key, 'data-state': step.state },
      h('div', { class: 'step-head' },
        h('span', { class: 'step-index' }, String(i + 1)),
        h('code', { class: 'mono step-key' }, step.key),
        badge(step.state, { 'data-test': 'step-state' }),
        h('span', { class: 'muted small' }, `weight ${step.weight}`),
        step.carried ? h('span', { class: 'chip', title: 'Completed by the job this one retries; not run again' }, 'carried') : null,
        unit ? h('span', { class: 'muted small' }, unit) : null,
        step.cursor !== undefined ? h('span', { class: 'muted small', title: 'checkpoint cursor' }, 'cursor ', mono(JSON.stringify(step.cursor))) : null,
        step.skip_reason ? h('span', { class: 'small' }, `skipped: ${step.skip_reason}`) : null,
        step.failure ? mono(step.failure.code, { class: 'mono failure-code', title: step.failure.message }) : null),
      attempts.length
        ? h('ol', { class: 'attempts' }, attempts.map((a) => h('li', { class: 'attempt', 'data-test': 'attempt', 'data-number': a.number, 'data-outcome': a.outcome },
          h('span', { class: 'attempt-no' }, `#${a.number}`),
          badge(a.outcome, { 'data-test': 'attempt-outcome' }),
          h('span', { class: 'attempt-fail' }, a.failure ? mono(a.failure.code, { 'data-test': 'attempt-failure', class: 'mono failure-code', title: a.failure.message || a.failure.code }) : null),
          h('span', { class: 'attempt-dur', title: a.ended_at ? null : 'still running' }, fmtDuration(attemptMs(a, now)), a.ended_at ? '' : '…'),
          h('span', { class: 'attempt-fence muted small' }, a.fence !== undefined ? `fence ${a.fence}` : ''),
          h('span', { class: 'attempt-at small' }, timeEl(a.started_at)),
          bar(a),
          a.failure && (a.failure.message || a.failure.guest_stderr)
            ? keep(open, `why:${step.key}:${a.number}`, h('details', { class: 'attempt-detail', open: open.has(`why:${step.key}:${a.number}`) }, h('summary', {}, 'why'),
              a.failure.message ? h('p', {}, a.failure.message) : null,
              a.failure.guest_stderr ? h('pre', { class: 'code stderr' }, a.failure.guest_stderr) : null))
            : null)))
        : h('p', { class: 'muted small attempts-none' }, step.carried ? 'Carried over from the predecessor.' : 'Not started.'));
  });
  return h('section', { class: 'card', 'data-test': 'timeline', 'aria-labelledby': 'timeline-h' },
    h('div', { class: 'section-head' },
      h('h2', { id: 'timeline-h' }, 'Steps'),
      span ? h('span', { class: 'muted small' }, `attempt bars span ${fmtDuration(span)} from `, timeEl(new Date(t0).toISOString())) : null),
    steps.length ? h('ol', { class: 'timeline' }, rows) : empty('This job has no steps.'));
}

// ---- input and outputs -------------------------------------------------------------------

function dataCard(job, open) {
  const outputs = (job.steps || []).filter((st) => st.output !== undefined || st.output_withheld);
  return h('section', { class: 'card', 'aria-labelledby': 'data-h' },
    h('h2', { id: 'data-h' }, 'Input and outputs'),
    jsonBlock(job.input, 'Input', { attrs: { 'data-test': 'job-input' }, openSet: open, key: 'input', withheld: job.input_withheld }),
    outputs.map((st) => jsonBlock(st.output, h('span', {}, 'Output of ', h('code', { class: 'mono' }, st.key)),
      { attrs: { 'data-test': 'step-output', 'data-key': st.key }, openSet: open, key: `out:${st.key}`, withheld: st.output_withheld })),
    job.waiting_for ? jsonBlock(job.waiting_for, 'Waiting for', { openSet: open, key: 'waiting' }) : null);
}

// ---- history and outbound ----------------------------------------------------------------

function detailOf(entry) {
  const parts = [];
  for (const [k, v] of Object.entries(entry)) {
    if (k === 'at' || k === 'event' || k === 'id') continue;
    if (v && typeof v === 'object' && typeof v.code === 'string') parts.push(h('span', { class: 'kv' }, `${k} `, mono(v.code, { class: 'mono failure-code', title: v.message || '' })));
    else if (typeof v === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(v) && /successor|predecessor|child|job|parent/.test(k)) parts.push(h('span', { class: 'kv' }, `${k} `, jobLink(v)));
    else if (typeof v === 'string' && /(_at|until)$/.test(k) && /^\d{4}-\d\d-\d\dT/.test(v)) parts.push(h('span', { class: 'kv' }, `${k} `, timeEl(v)));
    else parts.push(h('span', { class: 'kv' }, `${k} `, mono(typeof v === 'string' ? v : JSON.stringify(v))));
  }
  return parts;
}

// A lean kind's job is its row alone: its lifecycle is in the header and the step
// timeline (times, attempts, failure), and no history is written for it.
function leanHistoryCard() {
  return h('section', { class: 'panel card', 'data-test': 'history', 'data-record': 'lean' },
    h('h2', {}, 'History'),
    empty('None kept: this kind keeps a lean record (the job row alone, for volume).'));
}

function historyCard(history, open) {
  const rows = history.map((e) => h('tr', { 'data-test': 'history-row', 'data-event': e.event },
    h('td', {}, timeEl(e.at)), h('td', {}, mono(e.event)), h('td', { class: 'history-detail' }, detailOf(e))));
  return collapsible('history', open, h('span', {}, h('h2', { class: 'inline' }, 'History'), h('span', { class: 'count' }, String(history.length))),
    history.length ? table(['When', 'Event', 'Detail'], rows) : empty('No history.'), { 'data-test': 'history', class: 'panel card' });
}

function outboundCard(calls, open) {
  const rows = calls.map((c) => h('tr', { 'data-test': 'outbound-row' },
    h('td', {}, mono(`${c.step}#${c.attempt}`)), h('td', {}, String(c.seq)), h('td', {}, timeEl(c.at)),
    h('td', {}, mono(c.method)), h('td', { class: 'url' }, mono(c.url)),
    h('td', {}, c.denied ? h('span', { class: 'badge st-failed', title: 'denied by this policy layer' }, `denied: ${c.denied}`)
      : c.error ? mono(c.error, { class: 'mono failure-code' }) : c.status !== undefined ? h('span', { class: `http s${String(c.status)[0]}` }, String(c.status)) : '—'),
    h('td', { class: 'num' }, fmtBytes(c.bytes)), h('td', { class: 'num' }, fmtDuration(c.duration_ms))));
  return collapsible('outbound', open, h('span', {}, h('h2', { class: 'inline' }, 'Outbound requests'), h('span', { class: 'count' }, String(calls.length))),
    table(['Step', 'Seq', 'When', 'Method', 'URL', 'Result', 'Bytes', 'Time'], rows), { 'data-test': 'outbound', class: 'panel card' });
}

// ---- logs --------------------------------------------------------------------------------

const MAX_LINES = 5000;

function logsPanel(box, id, signal) {
  let job = null;
  let stepKeys = '';
  let run = null; // AbortController of the current load/follow
  let seen = new Set();
  let count = 0;
  let lastSeq = 0;
  const stepSel = select([['', 'All steps']], '', { 'data-test': 'logs-step', id: 'logs-step' });
  const followBox = h('input', { type: 'checkbox', 'data-test': 'logs-follow', id: 'logs-follow', checked: true });
  const followLabel = h('label', { class: 'toggle', for: 'logs-follow' }, followBox, ' Follow');
  const state = h('span', { class: 'muted small', 'data-test': 'logs-state', 'aria-live': 'polite' });
  const capped = h('p', { class: 'note warn', 'data-test': 'logs-capped', hidden: true });
  const list = h('ol', { class: 'log', 'aria-label': 'Log lines' });
  const scroller = h('div', { class: 'log-scroll', tabindex: 0 }, list);
  replace(box,
    h('div', { class: 'section-head' }, h('h2', { id: 'logs-h' }, 'Logs'),
      h('label', { for: 'logs-step', class: 'inline-label' }, 'Step ', stepSel), followLabel, state),
    capped, scroller);
  stepSel.addEventListener('change', () => load());
  followBox.addEventListener('change', () => load());

  function showCapped(body) {
    if (body.capped) {
      capped.hidden = false;
      capped.textContent = `This job hit its log cap: later lines were not kept${body.dropped ? ` (${body.dropped.toLocaleString('en-US')} dropped)` : ''}.`;
    }
  }

  function add(lines) {
    const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 24;
    for (const l of lines) {
      const key = l.seq ?? `${l.at}|${l.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (typeof l.seq === 'number') lastSeq = Math.max(lastSeq, l.seq);
      count += 1;
      list.append(h('li', { class: `log-line lv-${l.level} sm-${l.stream}`, 'data-test': 'log-line', 'data-seq': l.seq, 'data-step': l.step },
        h('time', { datetime: l.at, title: l.at, class: 'log-at' }, (l.at || '').slice(11, 23)),
        h('span', { class: 'log-step' }, l.step !== undefined ? `${l.step}#${l.attempt ?? ''}` : ''),
        h('span', { class: `log-level lv-${l.level}` }, l.level),
        h('span', { class: 'log-stream' }, l.stream && l.stream !== 'log' ? l.stream : ''),
        h('span', { class: 'log-msg' }, l.message)));
    }
    while (list.childElementCount > MAX_LINES) list.firstElementChild.remove();
    if (atBottom) scroller.scrollTop = scroller.scrollHeight;
  }

  async function load() {
    if (run) run.abort();
    run = new AbortController();
    const mine = run;
    signal.addEventListener('abort', () => mine.abort(), { once: true });
    seen = new Set();
    count = 0;
    lastSeq = 0;
    replace(list);
    capped.hidden = true;
    const step = stepSel.value;
    const q = step ? `step=${enc(step)}` : '';
    state.textContent = 'loading…';
    try {
      const body = await get(`/v1/jobs/${enc(id)}/logs${q ? `?${q}` : ''}`, { signal: mine.signal });
      add(body.lines || []);
      showCapped(body);
      const following = followBox.checked && job && !isFinal(job.state);
      state.textContent = following ? 'following…' : `${count} line${count === 1 ? '' : 's'}`;
      if (!count && !following) list.append(h('li', { class: 'empty' }, 'No log lines.'));
      if (!following) return;
      await stream(`/v1/jobs/${enc(id)}/logs?follow=true&after=${lastSeq}${q ? `&${q}` : ''}`, (type, data) => {
        if (type === 'line') add([JSON.parse(data)]);
        else if (type === 'capped') showCapped(JSON.parse(data));
        else if (type === 'end') {
          state.textContent = `${count} lines · the job is final, every line was sent`;
          followLabel.hidden = true;
          mine.abort();
        }
      }, mine.signal);
      if (!mine.signal.aborted) state.textContent = `${count} lines · the stream closed`;
    } catch (e) {
      if (e.name === 'AbortError' || mine.signal.aborted) return;
      state.textContent = 'unavailable';
      reportError(e);
    }
  }

  return {
    /** Called with every fresh copy of the job. */
    sync(next) {
      const first = job === null;
      job = next;
      const keys = (next.steps || []).map((x) => x.key).join('\n');
      if (keys !== stepKeys) {
        stepKeys = keys;
        const value = stepSel.value;
        replace(stepSel, h('option', { value: '' }, 'All steps'), (next.steps || []).map((x) => h('option', { value: x.key }, x.key)));
        stepSel.value = value;
      }
      followLabel.hidden = isFinal(next.state);
      if (first) load();
    },
  };
}
