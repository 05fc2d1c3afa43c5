// Bulk actions over the jobs list's filter: cancel or retry every matching job. One click
// never acts: the host counts the matching jobs first, the dialog shows that count, and
// the action takes only the jobs counted (`through`), carried out in the background as
// an audited operation whose progress is shown as it goes.

import { get, post, qs } from './api.js';
import { h, replace, reportError, fmtNum, sleep, shortId } from './ui.js';

const ACTIONS = {
  cancel: { label: 'Cancel matching…', verb: 'Cancel', done: 'cancelled', skips: 'final already, or of a kind that cannot be cancelled', note: 'Running steps stop at their next heartbeat; final jobs are skipped.' },
  retry: { label: 'Retry matching…', verb: 'Retry', done: 'retried', skips: 'not failed or cancelled, or retried already', note: 'Each failed or cancelled job is retried as a new, linked job; others are skipped.' },
};

/**
 * The bulk bar for a list filtered by `filter()` (the applied filters, as the API takes
 * them); `describe()` says the filter in words; `reload()` refreshes the list after.
 */
export function bulkBar({ filter, describe, reload, signal }) {
  const note = h('span', { class: 'muted small', 'aria-live': 'polite', 'data-test': 'jobs-bulk-result' });
  const title = h('h2', { id: 'jobs-bulk-h' });
  const countText = h('p', { 'data-test': 'jobs-bulk-count' });
  const explain = h('p', { class: 'muted small' });
  const confirm = h('button', { type: 'submit', class: 'button danger', 'data-test': 'jobs-bulk-confirm' });
  let chosen = null; // { action, through }
  const keep = h('button', { type: 'button', class: 'button subtle', 'data-test': 'jobs-bulk-dismiss', onclick: () => dialog.close() }, 'Keep them');
  const dialog = h('dialog', { 'data-test': 'jobs-bulk-dialog', 'aria-labelledby': 'jobs-bulk-h' },
    h('form', { method: 'dialog', onsubmit: async (e) => {
      e.preventDefault();
      confirm.disabled = true;
      try {
        const applied = filter();
        // An empty filter is every job of the tenant: the API takes that only said outright.
        const all = Object.values(applied).every((v) => v == null || String(v).trim() === '');
        const answer = await post('/v1/jobs/bulk', all ? { action: chosen.action, all: true, through: chosen.through }
          : { action: chosen.action, filter: applied, through: chosen.through }, { signal });
        dialog.close();
        await follow(answer.operation, chosen.action);
      } catch (err) { reportError(err); dialog.close(); } finally { confirm.disabled = false; }
    } },
    title, countText, explain,
    h('div', { class: 'dialog-buttons' },
      keep, confirm)));

  async function follow(op, action) {
    const say = (o) => {
      note.dataset.state = o.state;
      const done = o.done ?? o.retried ?? 0;
      note.textContent = `Operation ${shortId(o.id)} ${o.state}: ${fmtNum(done)} ${ACTIONS[action].done}, ${fmtNum(o.failed)} skipped of ${fmtNum(o.matched)}.`;
    };
    say(op);
    let current = op;
    while (current.state === 'running' && !signal.aborted) {
      await sleep(500, signal);
      if (signal.aborted) return;
      current = await get(`/v1/operations/${encodeURIComponent(op.id)}`, { signal });
      say(current);
    }
    await reload();
  }

  const buttons = Object.entries(ACTIONS).map(([action, a]) => {
    const button = h('button', { type: 'button', class: 'button', 'data-test': `jobs-bulk-${action}` }, a.label);
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        const count = await get(`/v1/jobs/count${qs({ ...filter(), action })}`, { signal });
        if (!count.matching) {
          note.textContent = 'No jobs match: nothing to do.';
          return;
        }
        chosen = { action, through: count.through };
        const n = `${fmtNum(count.matching)}${count.capped ? ' or more' : ''}`;
        const words = describe();
        title.textContent = `${a.verb} ${n} job${count.matching === 1 && !count.capped ? '' : 's'}?`;
        // Those the action does not apply to now are said apart: they are skipped, not acted on.
        const skipping = count.skipping ? ` ${fmtNum(count.skipping)} of them will be skipped (${a.skips}).` : '';
        replace(countText, `${n} job${count.matching === 1 && !count.capped ? '' : 's'}${words ? ` matching ${words}` : ''} will be ${a.done}; jobs submitted after this count are left alone.${skipping}`);
        explain.textContent = `${a.note} It runs in the background and stays in the operations log (Queues).`;
        confirm.textContent = `${a.verb} ${n}`;
        dialog.showModal();
        // The safe choice has the focus: Enter on an opened dialog never acts.
        keep.focus();
      } catch (e) { reportError(e); } finally { button.disabled = false; }
    });
    return button;
  });
  return h('div', { class: 'bulk' }, buttons, note, dialog);
}
