// #/schedules: the tenant's cron schedules — each with its expression, zone, next times,
// last firing and its job — and creating one (the API's own validation answers);
// #/schedules/<name>: one schedule, its actions (pause, resume, fire now, delete) and
// the jobs its firings submitted (their idempotency keys start `schedule:NAME:`).

import { get, post, request, enc, kinds } from './api.js';
import {
  h, replace, badge, timeEl, mono, table, empty, reportError, field, select, section, resultBox,
  describeError, jobLink, jsonBlock,
} from './ui.js';
import { jobRow, JOB_HEADERS } from './jobs.js';

const CATCH_UP = [['none', 'none — missed times are skipped'], ['one', 'one — the latest missed time fires'], ['all', 'all — every missed time fires']];
const OVERLAP = [['skip', 'skip — nothing fires while the last job is open'], ['allow', 'allow']];

function stateBadge(s) {
  return badge(s.paused ? 'paused' : 'active', { 'data-test': 'schedule-state' });
}

/** `iso` as a wall-clock time in time zone `zone` (the one the cron reads in). */
function inZone(iso, zone) {
  try {
    return new Intl.DateTimeFormat(undefined, { timeZone: zone, dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso));
  } catch {
    return '';
  }
}

/** The viewer's own time zone, as the browser names it. */
const viewerZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';

function upcomingList(s, { zoned = false } = {}) {
  if (!s.upcoming || !s.upcoming.length) return h('span', { class: 'muted' }, s.paused ? 'paused' : '—');
  // Beside each time in the viewer's zone, the same time where the cron reads it.
  const there = (t) => (zoned && s.timezone !== viewerZone()
    ? h('span', { class: 'muted small', 'data-test': 'upcoming-zoned' }, ` · ${inZone(t, s.timezone)} ${s.timezone}`) : null);
  return h('ol', { class: 'times', 'data-test': 'upcoming' }, s.upcoming.map((t) => h('li', {}, timeEl(t, { both: true }), there(t))));
}

export async function renderSchedules(view, ctx) {
  ctx.title('Schedules');
  const { signal } = ctx;
  const tbody = h('tbody');
  const list = h('div', { class: 'card flush' }, h('div', { class: 'table-wrap' },
    h('table', { 'data-test': 'schedules-table' },
      h('caption', { class: 'sr-only' }, 'Schedules, by name'),
      h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Cron', 'State', 'Next times', 'Last fired', 'Fired'].map((x) => h('th', { scope: 'col' }, x)))),
      tbody)));
  const status = h('div', { class: 'table-status' });

  async function load() {
    const answer = await get('/v1/schedules', { signal });
    const schedules = answer.schedules || [];
    replace(tbody, schedules.map((s) => h('tr', { 'data-test': 'schedule-row', 'data-name': s.name },
      h('td', {}, h('a', { href: `#/schedules/${enc(s.name)}`, 'data-test': 'schedule-link' }, h('bdi', {}, s.name))),
      h('td', {}, h('a', { href: `#/kinds/${enc(s.kind)}`, class: 'mono' }, s.kind)),
      h('td', {}, mono(s.cron), h('div', { class: 'muted small' }, s.timezone)),
      h('td', {}, stateBadge(s)),
      h('td', {}, upcomingList(s)),
      h('td', {}, s.last_fired_at ? timeEl(s.last_fired_at) : h('span', { class: 'muted' }, 'never'),
        s.last_job ? h('div', {}, jobLink(s.last_job)) : null),
      h('td', { class: 'num' }, String(s.fired)))));
    replace(status, schedules.length ? null : empty('No schedules yet: create one below.', { 'data-test': 'schedules-empty' }));
  }

  replace(view,
    h('div', { class: 'page-head' }, h('h1', { tabindex: -1 }, 'Schedules')),
    list, status,
    createCard(ctx, async (created) => {
      await load();
      location.hash = `#/schedules/${enc(created.name)}`;
    }));
  await load();
}

/** A new schedule; the host checks the name, the expression, the zone, the kind and the input. */
function createCard(ctx, onCreated) {
  const { signal } = ctx;
  const name = h('input', { type: 'text', name: 'name', 'data-test': 'schedule-name', required: true, spellcheck: 'false', placeholder: 'nightly-report' });
  const kind = select([['', 'Choose a kind']], '', { 'data-test': 'schedule-kind', name: 'kind', required: true });
  const cron = h('input', { type: 'text', name: 'cron', 'data-test': 'schedule-cron', required: true, spellcheck: 'false', class: 'mono', placeholder: '0 3 * * *' });
  const zone = h('input', { type: 'text', name: 'timezone', 'data-test': 'schedule-timezone', value: 'UTC', spellcheck: 'false' });
  const input = h('textarea', { name: 'input', 'data-test': 'schedule-input', rows: 3, spellcheck: 'false', class: 'mono' }, '{}');
  const catchUp = select(CATCH_UP, 'none', { name: 'catch_up', 'data-test': 'schedule-catch-up' });
  const overlap = select(OVERLAP, 'skip', { name: 'overlap', 'data-test': 'schedule-overlap' });
  const submit = h('button', { type: 'submit', class: 'button primary', 'data-test': 'schedule-create' }, 'Create schedule');
  const [result, say] = resultBox('schedule-result');
  kinds(signal).then((list) => {
    for (const k of list.kinds || []) kind.append(h('option', { value: k.kind }, k.kind));
  }, reportError);

  async function send(e) {
    e.preventDefault();
    let value;
    try {
      value = JSON.parse(input.value || 'null');
    } catch (err) {
      return say('failed', `The input is not JSON: ${err.message}`);
    }
    submit.disabled = true;
    try {
      const created = await post('/v1/schedules', {
        name: name.value.trim(), kind: kind.value, cron: cron.value.trim(), timezone: zone.value.trim() || 'UTC',
        input: value, catch_up: catchUp.value, overlap: overlap.value,
      }, { signal });
      say('ready', 'Created ', mono(created.name), '.');
      await onCreated(created);
    } catch (err) {
      if (err.name === 'AbortError') return;
      const violations = err.violations || [];
      say('failed', 'Refused: ', describeError(err), violations.length
        ? h('ul', { class: 'violations', 'data-test': 'violations' }, violations.map((v) => h('li', { 'data-test': 'violation' },
          mono(v.pointer || '(the input)'), ' ', v.message)))
        : null);
    } finally {
      submit.disabled = false;
    }
  }

  return section('New schedule', { 'data-test': 'schedule-new' },
    h('form', { class: 'submit-form', onsubmit: send },
      field('Name', name, '1-64 letters, digits, -, _ or .'),
      field('Kind', kind),
      field('Cron', cron, 'minute hour day month weekday; six fields with seconds first'),
      field('Time zone', zone, 'an IANA zone, e.g. Europe/Paris'),
      field('Input (JSON)', input, 'each firing\'s input; checked against the kind\'s schema now'),
      field('Missed times', catchUp),
      field('Overlap', overlap),
      h('div', { class: 'filter-buttons' }, submit)),
    result);
}

export async function renderSchedule(view, ctx, name) {
  ctx.title(`Schedule ${name}`);
  const { signal } = ctx;
  const path = `/v1/schedules/${enc(name)}`;
  const head = h('div');
  const [result, say] = resultBox('schedule-action-result');
  const firings = h('div');

  async function act(what, run) {
    try {
      await run();
      await load();
    } catch (err) {
      if (err.name !== 'AbortError') say('failed', `${what}: `, describeError(err));
    }
  }

  function paint(s) {
    const actions = [
      s.paused
        ? h('button', { type: 'button', class: 'button', 'data-test': 'schedule-resume', onclick: () => act('Resume', () => post(`${path}/resume`, {}, { signal })) }, 'Resume')
        : h('button', { type: 'button', class: 'button', 'data-test': 'schedule-pause', onclick: () => act('Pause', () => post(`${path}/pause`, {}, { signal })) }, 'Pause'),
      h('button', { type: 'button', class: 'button', 'data-test': 'schedule-trigger', onclick: () => act('Fire now', async () => {
        const job = await post(`${path}/trigger`, {}, { signal });
        say('ready', 'Fired: ', jobLink(job.id, { 'data-test': 'triggered-job' }), '.');
      }) }, 'Fire now'),
      h('button', { type: 'button', class: 'button danger', 'data-test': 'schedule-delete', onclick: () => {
        if (!window.confirm(`Delete schedule ${s.name}? The jobs it fired stay.`)) return;
        request('DELETE', path, { signal }).then(() => { location.hash = '#/schedules'; }, (err) => say('failed', 'Delete: ', describeError(err)));
      } }, 'Delete…'),
    ];
    replace(head,
      h('div', { class: 'page-head' }, h('h1', { tabindex: -1 }, 'Schedule ', h('bdi', {}, s.name)), stateBadge(s)),
      h('div', { class: 'card' },
        h('dl', { class: 'facts' }, [
          ['Kind', h('a', { href: `#/kinds/${enc(s.kind)}`, class: 'mono' }, s.kind)],
          ['Cron', mono(s.cron, { 'data-test': 'schedule-cron-shown' })],
          ['Time zone', h('span', { 'data-test': 'schedule-zone' }, s.timezone)],
          ['Missed times', s.catch_up],
          ['Overlap', s.overlap],
          ['Fired', h('span', { 'data-test': 'schedule-fired' }, String(s.fired))],
          ['Last fired', s.last_fired_at ? timeEl(s.last_fired_at, { both: true }) : h('span', { class: 'muted' }, 'never')],
        ].map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))),
        jsonBlock(s.input, 'Input each firing submits', { open: true, attrs: { 'data-test': 'schedule-input' } }),
        h('h3', {}, 'Next times ', h('span', { class: 'muted small', 'data-test': 'upcoming-zone-label' },
          `(in your time zone, ${viewerZone()}; the cron reads in ${s.timezone})`)),
        upcomingList(s, { zoned: true }),
        h('div', { class: 'actions' }, actions), result));
  }

  async function load() {
    const s = await get(path, { signal });
    paint(s);
    const page = await get(`/v1/jobs?q=${enc(`schedule:${s.name}:`)}&limit=20`, { signal });
    const jobs = page.jobs || [];
    replace(firings, section('Firings', { 'data-test': 'schedule-firings' },
      h('p', { class: 'muted small' }, 'The newest 20 jobs its firings submitted, by hand or on time.'),
      jobs.length ? table(JOB_HEADERS, jobs.map((j) => jobRow(j, 'firing-row'))) : empty('It has not fired yet.')));
  }

  replace(view, head, firings);
  await load();
}
