// #/operator (operator token): every tenant with its limits and usage, and the host's alerts.

import { get, enc } from './api.js';
import { h, replace, timeEl, mono, table, empty, reportError, fmtNum, fmtBytes, fmtDuration, section, every, shortId } from './ui.js';
import { usageTable } from './kinds.js';

const LIMITS = [
  ['weight', 'weight', String],
  ['max_running', 'running at once', fmtNum],
  ['max_queued', 'queued', fmtNum],
  ['rate_per_sec', 'submissions/s', fmtNum],
  ['rate_burst', 'burst', fmtNum],
  ['max_deployed_bytes', 'deployed bytes', fmtBytes],
  ['max_memory_bytes', 'step memory', fmtBytes],
  ['max_step_timeout_ms', 'step time', fmtDuration],
  ['max_fuel', 'step fuel', fmtNum],
];

function retention(secs) {
  if (secs === undefined || secs === null) return h('span', { class: 'muted' }, 'host default');
  const days = secs / 86400;
  return days >= 1 && Number.isInteger(days) ? `${days} d` : fmtDuration(secs * 1000);
}

/** Queued, running, steps and faults of a tenant's CapacityView (`kinds`), or of the `usage` shape. */
function totals(cap) {
  const kinds = cap.kinds || cap.usage || [];
  const sum = (k) => kinds.reduce((n, x) => n + (Number(x[k]) || 0), 0);
  return {
    kinds,
    queued: cap.queued ?? sum('queued'),
    running: cap.running ?? sum('running'),
    steps: sum('steps'),
    faults: sum('faults'),
  };
}

export async function renderOperator(view, ctx) {
  // Whose jobs to read, where the host lets the operator read them (each read audited).
  const readJobs = (name) => h('button', { type: 'button', class: 'button small', 'data-test': 'tenant-read', onclick: () => ctx.readTenant(name) }, 'Read jobs');
  ctx.title('Operator');
  const { signal } = ctx;
  const tenantsBox = h('div');
  const alertsBox = h('div');
  const open = new Set();
  replace(view, h('div', { class: 'page-head' }, h('h1', { tabindex: -1 }, 'Operator')), tenantsBox, alertsBox);

  async function loadTenants() {
    const { tenants = [], operator_reads: reads = false } = await get('/v1/tenants', { signal });
    const caps = new Map();
    // A few at a time: one request per tenant.
    const queue = [...tenants];
    await Promise.all(Array.from({ length: Math.min(4, queue.length) }, async () => {
      while (queue.length) {
        const t = queue.shift();
        try { caps.set(t.name, await get(`/v1/tenants/${enc(t.name)}/limits`, { signal })); } catch (e) {
          if (e.name === 'AbortError') throw e;
          caps.set(t.name, { error: e });
        }
      }
    }));
    const rows = [];
    for (const t of tenants) {
      const cap = caps.get(t.name) || {};
      const tot = cap.error ? null : totals(cap);
      const limits = cap.limits || {};
      const set = LIMITS.filter(([k]) => limits[k] !== undefined && limits[k] !== null && !(k === 'weight' && limits[k] === 1));
      const key = `t:${t.name}`;
      const toggle = h('button', { type: 'button', class: 'button small subtle', 'aria-expanded': String(open.has(key)), 'data-test': 'tenant-toggle' }, open.has(key) ? 'Hide kinds' : 'Kinds');
      const detail = h('tr', { class: 'sub', hidden: !open.has(key), 'data-test': 'tenant-detail', 'data-name': t.name },
        h('td', { colspan: 9 }, tot && tot.kinds.length ? usageTable(tot.kinds, 'tenant-usage') : empty('No kinds used yet.')));
      toggle.addEventListener('click', () => {
        const now = !open.has(key);
        if (now) open.add(key); else open.delete(key);
        detail.hidden = !now;
        toggle.setAttribute('aria-expanded', String(now));
        toggle.textContent = now ? 'Hide kinds' : 'Kinds';
      });
      rows.push(h('tr', { 'data-test': 'tenant-row', 'data-name': t.name },
        h('td', {}, mono(t.name)), h('td', {}, timeEl(t.created_at)), h('td', {}, retention(t.retention_secs)),
        cap.error
          ? h('td', { colspan: 5, class: 'warn-text' }, `${cap.error.code || 'error'}: ${cap.error.message}`)
          : [h('td', { class: 'num', 'data-test': 'tenant-queued' }, fmtNum(tot.queued)), h('td', { class: 'num', 'data-test': 'tenant-running' }, fmtNum(tot.running)),
            h('td', { class: 'num' }, fmtNum(tot.steps)), h('td', { class: ['num', tot.faults ? 'warn-text' : null] }, fmtNum(tot.faults)),
            h('td', { class: 'small' }, set.length ? set.map(([k, label, f]) => h('span', { class: 'chip' }, `${label} ${f(limits[k])}`)) : h('span', { class: 'muted' }, 'no limits'))],
        h('td', {}, toggle, reads ? [' ', readJobs(t.name)] : null)), detail);
    }
    // Offered only where the host lets the operator read (each read refused otherwise).
    const readsNote = reads ? null : h('p', { class: 'muted small', 'data-test': 'operator-reads-off' },
      'Reading tenants\u2019 jobs is off on this host (operator_reads_tenants): a tenant\u2019s jobs need its own token.');
    replace(tenantsBox, section('Tenants', { 'data-test': 'tenants' }, readsNote,
      tenants.length ? table(['Tenant', 'Created', 'Retention', 'Queued', 'Running', 'Steps', 'Faults', 'Limits', ''], rows, { 'data-test': 'tenants-table' })
        : empty('No tenants yet: spindle tenant create NAME.')));
  }

  async function loadAlerts() {
    const { alerts = [] } = await get('/v1/alerts', { signal });
    replace(alertsBox, section('Alerts', { 'data-test': 'alerts' },
      h('p', { class: 'muted small' }, 'Operational alerts, newest first: late successes for failed jobs, sandbox faults, …'),
      alerts.length ? table(['When', 'Code', 'Tenant', 'Kind', 'Job', 'Message'], alerts.map((a) => h('tr', { 'data-test': 'alert-row', 'data-code': a.code },
        h('td', {}, timeEl(a.at)), h('td', {}, h('span', { class: `badge al-${String(a.code).split('.')[0]}` }, a.code)),
        h('td', {}, a.tenant ? mono(a.tenant) : '—'), h('td', {}, a.kind ? mono(a.kind) : '—'),
        h('td', {}, a.job ? mono(shortId(a.job), { title: a.job }) : '—'), h('td', {}, a.message))), { 'data-test': 'alerts-table' })
        : empty('No alerts.', { 'data-test': 'alerts-table' })));
  }

  await Promise.all([loadTenants().catch(reportError), loadAlerts().catch(reportError)]);
  every(15_000, () => (document.hidden ? null : Promise.all([loadTenants(), loadAlerts()])), signal);
}
