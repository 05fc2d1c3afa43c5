// The dashboard's shell: sign-in, the navigation, the error banner and hash routing.
// Routes: #/jobs, #/jobs/<id>, #/kinds, #/kinds/<kind>, #/schedules, #/schedules/<name>,
// #/queues, #/operator.

import { session, detectRole, onUnauthorised, ApiError } from './api.js';
import { h, replace, onError, describeError, tickTimes } from './ui.js';
import { renderJobs } from './jobs.js';
import { renderJob } from './job.js';
import { renderKinds, renderKind } from './kinds.js';
import { renderQueues } from './queues.js';
import { renderSchedules, renderSchedule } from './schedules.js';
import { renderOperator } from './operator.js';

const root = document.getElementById('app');
let current = null; // { controller, path } of the page on show

// ---- the error banner (one for the whole app) ------------------------------------------

const bannerText = h('span', { class: 'banner-text' });
const banner = h('div', { class: 'banner', role: 'alert', 'data-test': 'error', hidden: true },
  h('strong', {}, 'Error '), bannerText,
  h('button', { type: 'button', class: 'banner-close', 'aria-label': 'Dismiss the error', onclick: () => hideError() }, '×'));

function showError(err) {
  if (err instanceof ApiError && err.status === 401) return; // sign-in says so
  replace(bannerText, describeError(err));
  banner.hidden = false;
}
function hideError() { banner.hidden = true; bannerText.textContent = ''; }
onError(showError);

// ---- routing ---------------------------------------------------------------------------

function parseHash() {
  const raw = location.hash.replace(/^#/, '');
  const at = raw.indexOf('?');
  const path = at < 0 ? raw : raw.slice(0, at);
  const query = new URLSearchParams(at < 0 ? '' : raw.slice(at + 1));
  const parts = path.split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  return { parts, query };
}

/** `#/path?query` with empty values left out. */
function hashOf(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const text = q.toString();
  return `#${path}${text ? `?${text}` : ''}`;
}

const TENANT_PAGES = new Set(['jobs', 'kinds', 'schedules', 'queues']);

function defaultPage() { return session.role === 'operator' ? '#/operator' : '#/jobs'; }

function route() {
  if (!session.token) return renderSignIn();
  const { parts, query } = parseHash();
  if (!parts.length) {
    history.replaceState(null, '', defaultPage());
    return route();
  }
  if (current) current.controller.abort();
  const controller = new AbortController();
  // A new page starts at its top: a scroll kept from the last page would leave what is
  // at the top of this one behind the sticky bar.
  const path = parts.join('/');
  if (current && current.path !== path) window.scrollTo(0, 0);
  current = { controller, path };
  hideError();
  const shell = ensureShell(parts[0]);
  const view = shell.view;
  replace(view);
  const ctx = {
    signal: controller.signal,
    query,
    go: (path, params) => {
      const next = hashOf(path, params);
      if (next === location.hash) route(); else location.hash = next;
    },
    /** Puts `params` in the address (to share, or to come back to) without leaving the page. */
    keep: (path, params) => {
      const next = hashOf(path, params);
      if (next !== location.hash) history.replaceState(null, '', next);
      lastPage = next;
    },
    title: (text) => { document.title = `${text} · Spindle`; },
    readTenant,
  };
  const [page, arg, ...rest] = parts;
  const role = session.role;
  let done;
  const reads = role === 'operator' && session.reading && page === 'jobs';
  if (TENANT_PAGES.has(page) && role !== 'tenant' && !reads) done = needs(view, ctx, 'a tenant token', 'The operator token manages tenants; a tenant\'s jobs, kinds and queues need that tenant\'s token.');
  else if (page === 'operator' && role !== 'operator') done = needs(view, ctx, 'the operator token', 'This page lists every tenant, their limits and the host\'s alerts.');
  else if (page === 'jobs' && arg === undefined) done = renderJobs(view, ctx);
  else if (page === 'jobs' && !rest.length) done = renderJob(view, ctx, arg);
  else if (page === 'kinds' && arg === undefined) done = renderKinds(view, ctx);
  else if (page === 'kinds' && !rest.length) done = renderKind(view, ctx, arg);
  else if (page === 'schedules' && arg === undefined) done = renderSchedules(view, ctx);
  else if (page === 'schedules' && !rest.length) done = renderSchedule(view, ctx, arg);
  else if (page === 'queues' && arg === undefined) done = renderQueues(view, ctx);
  else if (page === 'operator' && arg === undefined) done = renderOperator(view, ctx);
  else done = notFound(view, ctx);
  Promise.resolve(done).catch((e) => {
    if (e?.name === 'AbortError' || controller.signal.aborted) return;
    showError(e);
    if (!view.querySelector('h1')) {
      replace(view, h('h1', { tabindex: -1 }, 'This page could not be loaded'),
        h('p', {}, 'The error above says why. ', h('a', { href: location.hash, onclick: (ev) => { ev.preventDefault(); route(); } }, 'Try again'), '.'));
    }
  });
  if (shell.navigated) {
    const heading = view.querySelector('h1');
    (heading || shell.main).focus({ preventScroll: true });
  }
}

function needs(view, ctx, what, why) {
  ctx.title('Not available');
  replace(view, h('h1', { tabindex: -1 }, 'Not available with this token'),
    h('p', {}, `This page needs ${what}. ${why}`),
    h('p', {}, h('a', { href: defaultPage() }, 'Go to your start page')));
}

function notFound(view, ctx) {
  ctx.title('Not found');
  replace(view, h('h1', { tabindex: -1 }, 'No such page'), h('p', {}, h('a', { href: defaultPage() }, 'Go to your start page')));
}

// ---- the shell -------------------------------------------------------------------------

let shell = null;
let lastPage = null;

function navLink(page, label, test) {
  return h('a', { href: `#/${page}`, 'data-test': test, 'data-page': page }, label);
}

function ensureShell(page) {
  if (!shell) {
    const role = session.role;
    const reading = session.reading;
    const links = role === 'operator'
      ? [navLink('operator', 'Operator', 'nav-operator'), reading ? navLink('jobs', `Jobs of ${reading}`, 'nav-jobs') : null].filter(Boolean)
      : [navLink('jobs', 'Jobs', 'nav-jobs'), navLink('kinds', 'Kinds', 'nav-kinds'), navLink('schedules', 'Schedules', 'nav-schedules'), navLink('queues', 'Queues', 'nav-queues')];
    const who = role === 'operator' ? (reading ? `operator, reading ${reading}` : 'operator') : `tenant ${session.tenant || ''}`.trim();
    const nav = h('nav', { class: 'sidebar', 'aria-label': 'Main' }, h('ul', {}, links.map((a) => h('li', {}, a))));
    const main = h('main', { id: 'main', tabindex: -1 });
    const view = h('div', { class: 'view' });
    // Reading a tenant's jobs says so on every page, with the way out.
    const notice = reading ? h('div', { class: 'reading', role: 'status', 'data-test': 'reading-notice' },
      h('span', {}, 'Reading tenant ', h('strong', {}, reading), '\'s jobs as the operator: read-only, and each read is written to ', h('strong', {}, reading), '\'s audit trail.'),
      h('button', { type: 'button', class: 'button small', 'data-test': 'stop-reading', onclick: () => stopReading() }, 'Stop reading')) : null;
    replace(main, banner, notice, view);
    replace(root,
      h('header', { class: 'topbar' },
        // To the page's main content: a page that marks it (`data-skip-to`, the jobs
        // table) is reached in three presses, Tab, Enter and Tab, not past every filter.
        h('button', { type: 'button', class: 'skip', 'data-test': 'skip', onclick: () => (main.querySelector('[data-skip-to]') || main).focus() }, 'Skip to content'),
        h('a', { class: 'brand', href: defaultPage() }, h('span', { class: 'brand-mark', 'aria-hidden': 'true' }), 'Spindle'),
        h('span', { class: 'whoami', 'data-test': 'whoami' }, 'signed in as ', h('strong', {}, who)),
        h('button', { type: 'button', class: 'button subtle', 'data-test': 'signout', onclick: signOut }, 'Sign out')),
      h('div', { class: 'layout' }, nav, main));
    shell = { nav, main, view, navigated: false };
  }
  for (const a of shell.nav.querySelectorAll('a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  shell.navigated = lastPage !== null;
  lastPage = location.hash;
  return shell;
}

/** The operator reads `tenant`'s jobs (null: stops): the shell is built anew for it. */
function readTenant(tenant) {
  session.read(tenant);
  shell = null;
  lastPage = null;
  const next = tenant ? '#/jobs' : '#/operator';
  if (next === location.hash) route(); else location.hash = next;
}

function stopReading() { readTenant(null); }

function signOut() {
  if (current) current.controller.abort();
  current = null;
  session.clear();
  shell = null;
  lastPage = null;
  hideError();
  history.replaceState(null, '', '#/');
  renderSignIn();
}

// ---- sign-in ---------------------------------------------------------------------------

function renderSignIn(message) {
  if (current) current.controller.abort();
  current = null;
  shell = null;
  lastPage = null;
  document.title = 'Sign in · Spindle';
  const input = h('input', {
    type: 'password', id: 'token', name: 'token', required: true, autocomplete: 'off', spellcheck: 'false',
    'data-test': 'signin-token', placeholder: 'spt_… or the operator token', 'aria-describedby': 'token-hint',
  });
  const submit = h('button', { type: 'submit', class: 'button primary', 'data-test': 'signin-submit' }, 'Sign in');
  const form = h('form', { class: 'signin card', 'data-test': 'signin-form', onsubmit: async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    submit.disabled = true;
    submit.textContent = 'Checking…';
    hideError();
    try {
      const { role, tenant } = await detectRole(token);
      session.set(token, role, tenant);
      const { parts } = parseHash();
      const page = parts[0];
      const fits = page && (role === 'operator' ? page === 'operator' : TENANT_PAGES.has(page));
      if (!fits) history.replaceState(null, '', defaultPage());
      route();
    } catch (err) {
      replace(bannerText, describeError(err));
      banner.hidden = false;
      submit.disabled = false;
      submit.textContent = 'Sign in';
      input.select();
    }
  } },
  h('h1', {}, h('span', { class: 'brand-mark', 'aria-hidden': 'true' }), 'Spindle'),
  h('p', { class: 'muted' }, 'Sign in with a tenant token (spt_…) or the operator token.'),
  h('label', { for: 'token', class: 'field-label' }, 'Token'),
  input,
  h('p', { id: 'token-hint', class: 'hint' }, 'Kept in this tab\'s session storage only, sent as a bearer token, and cleared when you sign out or close the tab.'),
  submit);
  replace(root, h('main', { class: 'signin-page' }, banner, form));
  if (message) { replace(bannerText, message); banner.hidden = false; } else hideError();
  input.focus();
}

onUnauthorised((err) => {
  if (!session.token) return; // already signed out by another answer
  session.clear();
  renderSignIn(`Signed out: ${describeError(err)}. Sign in again.`);
});

window.addEventListener('hashchange', () => { if (session.token) route(); });
setInterval(tickTimes, 15_000);
route();
