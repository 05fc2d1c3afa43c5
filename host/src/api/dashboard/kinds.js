// #/kinds and #/kinds/<kind>: the tenant's kinds, their versions and deploys, rollback,
// and deploying a new version from a .wasm file.

import { get, post, request, enc, forgetKinds } from './api.js';
import {
  h, replace, badge, timeEl, mono, table, empty, reportError, jsonBlock, fmtBytes, fmtDuration, fmtNum,
  field, section, shortId, shortDigest, describeError, resultBox,
} from './ui.js';

const KIND_NAME = /^[a-z0-9._-]{1,64}$/;

function breakerOf(kind) {
  const b = (kind.breakers || []).find((x) => x.version === kind.current_version);
  return b ? b.state : 'closed';
}

function breakerBadge(state, faults) {
  const word = { closed: 'closed', open: 'open', half_open: 'half open' }[state] || state;
  return h('span', { class: `badge br-${state}`, title: faults !== undefined ? `${faults} recent faults` : null, 'data-test': 'breaker' }, word);
}

export async function renderKinds(view, ctx) {
  ctx.title('Kinds');
  const { signal } = ctx;
  const list = h('div');
  const usageBox = h('div');
  const compiling = h('div');
  replace(view,
    h('div', { class: 'page-head' }, h('h1', { tabindex: -1 }, 'Kinds')),
    list, compiling, deployCard(ctx, '', () => load()), usageBox);

  async function load() {
    forgetKinds();
    const body = await get('/v1/kinds', { signal });
    const kinds = body.kinds || [];
    replace(list, section(null, { class: 'card flush' }, kinds.length
      ? table(['Kind', 'Current', 'Latest', 'Breaker', 'Updated'], kinds.map((k) => h('tr', { 'data-test': 'kind-row', 'data-kind': k.kind },
        h('td', {}, h('a', { href: `#/kinds/${enc(k.kind)}`, class: 'mono' }, k.kind)),
        h('td', {}, `v${k.current_version}`),
        h('td', {}, `v${k.latest_version}`, k.latest_version !== k.current_version ? h('span', { class: 'chip', title: 'The newest version is not the current one (rolled back)' }, 'not current') : null),
        h('td', {}, breakerBadge(breakerOf(k), (k.breakers || []).find((x) => x.version === k.current_version)?.recent_faults),
          (k.breakers || []).filter((b) => b.version !== k.current_version && b.state !== 'closed').map((b) => h('span', { class: 'muted small' }, ` v${b.version}: ${b.state}`))),
        h('td', {}, timeEl(k.updated_at)))), { 'data-test': 'kinds-table' })
      : empty('No kinds yet: deploy a component below.')));
    const pending = body.compiling || [];
    replace(compiling, pending.length ? section('Compiling now', { 'data-test': 'compiling' }, deploysTable(pending)) : null);
  }

  async function usage() {
    try {
      const u = await get('/v1/usage', { signal });
      replace(usageBox, usageCard(u));
    } catch (e) { reportError(e); }
  }

  await load();
  usage();
}

/** A tenant's usage by kind (CapacityView: `{tenant, limits, kinds: [...]}`). */
export function usageTable(kinds, test = 'usage-table') {
  return table(['Kind', 'Queued', 'Running', 'Running limit', 'Steps', 'Faults', 'Sandbox time', 'Wall time', 'Outbound'],
    kinds.map((k) => h('tr', { 'data-test': 'usage-row', 'data-kind': k.kind },
      h('td', {}, mono(k.kind)), h('td', { class: 'num' }, fmtNum(k.queued)), h('td', { class: 'num' }, fmtNum(k.running)),
      h('td', { class: 'num' }, k.max_running ?? '—'), h('td', { class: 'num' }, fmtNum(k.steps)),
      h('td', { class: ['num', k.faults ? 'warn-text' : null] }, fmtNum(k.faults)),
      h('td', { class: 'num' }, k.sandbox_micros !== undefined ? fmtDuration(k.sandbox_micros / 1000) : '—'),
      h('td', { class: 'num' }, k.wall_micros !== undefined ? fmtDuration(k.wall_micros / 1000) : '—'),
      h('td', { class: 'num' }, fmtNum(k.outbound_requests)))), { 'data-test': test });
}

function usageCard(u) {
  const kinds = u.kinds || u.usage || [];
  return section('Usage', { 'data-test': 'usage' },
    h('p', { class: 'muted small' }, 'Steps, faults and time since the host started counting; queued and running are now.'),
    kinds.length ? usageTable(kinds) : empty('No usage yet.'));
}

function deploysTable(deploys) {
  return table(['Deploy', 'State', 'Version', 'Digest', 'Size', 'Uploaded', 'Finished', 'Error'],
    deploys.map((d) => h('tr', { 'data-test': 'deploy-row', 'data-id': d.id, 'data-state': d.state },
      h('td', {}, mono(shortId(d.id), { title: d.id })), h('td', {}, badge(d.state)),
      h('td', { class: 'num' }, d.version !== undefined && d.version !== null ? `v${d.version}` : '—'),
      h('td', {}, mono(shortDigest(d.digest), { title: d.digest })), h('td', { class: 'num' }, fmtBytes(d.size)),
      h('td', {}, timeEl(d.created_at)), h('td', {}, timeEl(d.finished_at)),
      h('td', {}, d.error ? h('span', {}, mono(d.error.code, { class: 'mono failure-code' }), ' ', d.error.message) : null))));
}

export async function renderKind(view, ctx, name) {
  ctx.title(`Kind ${name}`);
  const { signal } = ctx;
  const body = h('div');
  replace(view, h('div', { class: 'page-head' },
    h('h1', { tabindex: -1 }, 'Kind ', h('code', { class: 'mono' }, name)),
    h('a', { href: `#/jobs?kind=${enc(name)}`, class: 'button subtle' }, 'Its jobs →')),
  body, deployCard(ctx, name, () => load()));
  const open = new Set();
  let submitBox = null;

  async function load() {
    const kind = await get(`/v1/kinds/${enc(name)}`, { signal });
    const versions = [...(kind.versions || [])].sort((a, b) => b.version - a.version);
    const breakers = new Map((kind.breakers || []).map((b) => [b.version, b]));
    const note = h('p', { class: 'muted small', 'data-test': 'rollback-result', 'aria-live': 'polite' });
    const rows = versions.map((v) => {
      const current = v.version === kind.current_version;
      const spec = v.spec;
      const b = breakers.get(v.version);
      const btn = h('button', {
        type: 'button', class: 'button small', 'data-test': `rollback-${v.version}`, disabled: current,
        title: current ? 'This version is current' : `New submissions will use v${v.version}`,
        onclick: async () => {
          btn.disabled = true;
          try {
            const r = await post(`/v1/kinds/${enc(name)}/rollback`, { version: v.version }, { signal });
            forgetKinds();
            await load();
            body.querySelector('[data-test="rollback-result"]').textContent = `v${r.current_version ?? v.version} is now current.`;
          } catch (e) { reportError(e); btn.disabled = false; }
        },
      }, current ? 'Current' : 'Make current');
      return [
        h('tr', { 'data-test': 'version-row', 'data-version': v.version, class: current ? 'current' : null },
          h('td', { class: 'num' }, `v${v.version}`, current ? h('span', { class: 'badge st-current', 'data-test': 'current-version' }, 'current') : null),
          h('td', {}, mono(shortDigest(v.digest), { title: v.digest })),
          h('td', { class: 'num' }, v.size !== undefined ? fmtBytes(v.size) : '—'),
          h('td', {}, timeEl(v.created_at)),
          h('td', {}, spec ? spec.steps.map((x) => mono(`${x.key}×${x.weight}`, { class: 'mono chip' })) : h('span', { class: 'muted' }, 'description unreadable')),
          h('td', { class: 'small' }, spec ? [
            `${spec.retry.max_attempts} attempts, ${fmtDuration(spec.retry.initial_backoff_ms)}–${fmtDuration(spec.retry.max_backoff_ms)} backoff`,
            h('br'), [spec.cancellable ? 'cancellable' : 'not cancellable', spec.has_failure_effect ? 'failure effect' : null, spec.notifies_on_success ? 'on-success' : null].filter(Boolean).join(' · '),
          ] : '—'),
          h('td', {}, b ? breakerBadge(b.state, b.recent_faults) : breakerBadge('closed')),
          h('td', {}, btn)),
        (spec && spec.input_schema) || v.deployment ? h('tr', { class: 'sub' }, h('td', { colspan: 8 },
          spec && spec.input_schema ? jsonBlock(spec.input_schema, `Input schema of v${v.version}`, { attrs: { 'data-test': 'input-schema' }, openSet: open, key: `schema:${v.version}` }) : null,
          v.deployment ? deploymentDetails(v.deployment, v.version, open) : null)) : null,
      ];
    });
    const currentSpec = versions.find((v) => v.version === kind.current_version)?.spec;
    // The submit card is built once, so a reload (after a rollback) keeps what was typed
    // unless the current version, and with it the expected input, changed.
    if (!submitBox || submitBox.dataset.version !== String(kind.current_version)) {
      submitBox = submitCard(ctx, name, kind.current_version, currentSpec);
    }
    replace(body,
      h('div', { class: 'card' }, h('dl', { class: 'facts' },
        h('div', {}, h('dt', {}, 'Current version'), h('dd', { 'data-test': 'kind-current' }, `v${kind.current_version}`)),
        h('div', {}, h('dt', {}, 'Latest version'), h('dd', {}, `v${kind.latest_version}`)),
        h('div', {}, h('dt', {}, 'Updated'), h('dd', {}, timeEl(kind.updated_at, { both: true }))))),
      submitBox,
      section('Versions', { 'data-test': 'versions' }, note,
        table(['Version', 'Digest', 'Size', 'Deployed', 'Steps', 'Policy', 'Breaker', ''], rows, { 'data-test': 'versions-table' })),
      section('Latest deploys', { 'data-test': 'deploys' }, (kind.deploys || []).length ? deploysTable(kind.deploys) : empty('No deploys recorded.')));
  }
  await load();
}

function deploymentDetails(d, version, open) {
  const items = [
    d.allow && d.allow.length ? ['Outbound rules', d.allow.map((r) => mono(r, { class: 'mono chip' }))] : null,
    d.secrets && d.secrets.length ? ['Secrets', d.secrets.map((r) => mono(r, { class: 'mono chip' }))] : null,
    d.settings && Object.keys(d.settings).length ? ['Settings', Object.entries(d.settings).map(([k, v]) => mono(`${k}=${v}`, { class: 'mono chip' }))] : null,
    d.max_running ? ['Running limit', String(d.max_running)] : null,
    d.secrets_in_body ? ['Secrets in bodies', 'yes'] : null,
  ].filter(Boolean);
  if (!items.length) return null;
  const key = `dep:${version}`;
  const el = h('details', { class: 'json', open: open.has(key) }, h('summary', {}, `Deployment of v${version}`),
    h('dl', { class: 'facts compact' }, items.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))));
  el.addEventListener('toggle', () => (el.open ? open.add(key) : open.delete(key)));
  return el;
}

// ---- submitting a job ---------------------------------------------------------------------

/**
 * A job of this kind from a JSON input. The input starts as the current version's example
 * (what `spindle kinds KIND` prints), and a refusal lists each violation of the kind's input
 * schema by its JSON pointer: the host checks the input before anything is queued.
 */
function submitCard(ctx, kind, version, spec) {
  const { signal } = ctx;
  const schema = spec && spec.input_schema;
  const example = spec && spec.input_example !== undefined && spec.input_example !== null ? spec.input_example : {};
  const input = h('textarea', { 'data-test': 'submit-input', name: 'input', rows: 6, spellcheck: 'false', class: 'mono' },
    JSON.stringify(example, null, 2));
  const submit = h('button', { type: 'submit', class: 'button primary', 'data-test': 'submit-job' }, 'Submit');
  const [result, say] = resultBox('submit-result');

  async function send(e) {
    e.preventDefault();
    let value;
    try {
      value = JSON.parse(input.value);
    } catch (err) {
      return say('failed', `The input is not JSON: ${err.message}`);
    }
    submit.disabled = true;
    try {
      const job = await post('/v1/jobs', { kind, input: value }, { signal });
      say('ready', 'Submitted ', h('a', { href: `#/jobs/${enc(job.id)}`, 'data-test': 'submitted-job' }, mono(shortId(job.id), { title: job.id })),
        ` (${job.state}).`);
    } catch (err) {
      if (err.name === 'AbortError') return;
      if (err.code === 'invalid-input') {
        say('failed', h('div', {}, `Refused, nothing was queued: the input does not follow ${kind}'s schema.`,
          h('ul', { class: 'violations', 'data-test': 'violations' }, err.violations.map((v) => h('li', { 'data-test': 'violation', 'data-pointer': v.pointer },
            mono(v.pointer || '(the input)', { class: 'mono failure-code' }), ' ', v.message)))));
      } else {
        say('failed', 'Refused: ', describeError(err));
      }
    } finally {
      submit.disabled = false;
    }
  }

  const card = section('Submit a job', { 'data-test': 'submit' },
    schema
      ? jsonBlock(schema, `Input schema of v${version}`, { attrs: { 'data-test': 'current-input-schema' } })
      : h('p', { class: 'muted small' }, `v${version} declares no input schema: any JSON input is accepted.`),
    h('form', { class: 'submit-form', onsubmit: send },
      field('Input (JSON)', input, schema ? 'Starts as an example that follows the schema.' : null),
      h('div', { class: 'filter-buttons' }, submit)),
    result);
  card.dataset.version = String(version);
  return card;
}

// ---- deploying a new version -------------------------------------------------------------

function deployCard(ctx, kind, onDone) {
  const { signal } = ctx;
  const nameInput = h('input', { type: 'text', 'data-test': 'deploy-kind', name: 'kind', value: kind, required: true, pattern: '[a-z0-9._\\-]{1,64}', spellcheck: 'false', placeholder: 'e.g. thumbnail' });
  const file = h('input', { type: 'file', 'data-test': 'deploy-file', name: 'component', accept: '.wasm,application/wasm', required: true });
  const submit = h('button', { type: 'submit', class: 'button primary', 'data-test': 'deploy-submit' }, 'Deploy');
  const [result, say] = resultBox('deploy-result');

  async function deploy(e) {
    e.preventDefault();
    const name = nameInput.value.trim();
    const component = file.files && file.files[0];
    if (!KIND_NAME.test(name)) return say('failed', 'A kind name is 1–64 characters of a–z, 0–9, “.”, “_” or “-”.');
    if (!component) return say('failed', 'Choose a .wasm component.');
    submit.disabled = true;
    const started = Date.now();
    let ticker = null;
    try {
      say('uploading', `Uploading ${fmtBytes(component.size)}…`);
      const { status, body } = await request('PUT', `/v1/kinds/${enc(name)}?wait=2`, { body: component, contentType: 'application/wasm', signal });
      let deployRecord = status === 201 ? body.deploy : body;
      if (status === 202 || deployRecord?.state === 'compiling') {
        const show = () => say('compiling', h('span', { class: 'spinner', 'aria-hidden': 'true' }),
          `Compiling ${name}… ${Math.round((Date.now() - started) / 1000)} s`, h('span', { class: 'muted small' }, ` (deploy ${shortId(deployRecord.id)})`));
        show();
        ticker = setInterval(show, 1000);
        while (deployRecord.state === 'compiling' && !signal.aborted) {
          deployRecord = await get(`/v1/kinds/${enc(name)}/deploys/${enc(deployRecord.id)}?wait=20`, { signal });
        }
      }
      const version = status === 201 ? body.version : deployRecord.version;
      if (status === 201 || deployRecord.state === 'ready') {
        say('ready', 'Deployed ', h('a', { href: `#/kinds/${enc(name)}` }, h('strong', { 'data-test': 'deploy-version' }, `${name} v${version}`)),
          `, now current (${fmtDuration(Date.now() - started)}).`);
        forgetKinds();
        file.value = '';
        await onDone();
      } else {
        const err = deployRecord.error || { code: 'failed', message: '' };
        say('failed', 'Deploy failed: ', mono(err.code, { class: 'mono failure-code' }), ` ${err.message}`);
      }
    } catch (err) {
      if (err.name === 'AbortError') return;
      say('failed', 'Deploy refused: ', describeError(err));
      reportError(err);
    } finally {
      clearInterval(ticker);
      submit.disabled = false;
    }
  }

  return section('Deploy a new version', { 'data-test': 'deploy' },
    h('form', { class: 'deploy-form', onsubmit: deploy },
      field('Kind', nameInput),
      field('Component (.wasm)', file),
      h('div', { class: 'filter-buttons' }, submit)),
    h('p', { class: 'hint' }, 'The component must describe itself as this kind. It is checked at once, compiles in the background and becomes the current version when it is ready.'),
    result);
}
