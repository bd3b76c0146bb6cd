// Batch jobs (GET /v2/jobs, newest first): state, progress, rate, errors; cancel (admin token).
import {call, get} from './api.js';
import {add, badge, clear, errorBox, every, fill, h, table} from './dom.js';

export async function jobsPage(view) {
  const status = h('div');
  const body = h('div');
  add(view, h('h2', {}, 'Batch jobs'), h('p', {class: 'muted'}, 'Submitted with POST /v2/jobs or `inferd batch`' +
    ' (docs/batch.md).'), status, body);
  const refresh = async () => {
    let jobs;
    try {
      jobs = (await get('/v2/jobs')).jobs;
    } catch (e) {
      fill(body, errorBox(e));
      return;
    }
    if (!jobs.length) {
      fill(body, h('p', {class: 'muted', id: 'jobs-empty'}, 'No jobs.'));
      return;
    }
    fill(body, table(['job', 'model', 'state', 'progress', 'rows', 'rate', 'errors', ''], jobs.map((j) => {
      const p = j.progress === null || j.progress === undefined ? null : j.progress;
      return [j.id, j.model, h('span', {}, badge(j.state), j.message ? h('div', {class: 'muted'}, j.message) : null),
        p === null ? '-' : h('div', {}, h('div', {class: 'bar'}, h('div', {style: {width: (100 * p).toFixed(1) + '%'}})),
          (100 * p).toFixed(1) + '%' + (j.eta_seconds ? ', ' + Math.round(j.eta_seconds) + ' s left' : '')),
        j.rows_done + (j.rows_total ? ' of ' + j.rows_total : '') + ' (' + j.rows_written + ' written)',
        j.rows_per_second ? Math.round(j.rows_per_second) + ' rows/s' : '-',
        (j.row_errors || 0) + ((j.recent_errors || []).length ? ': ' + j.recent_errors[0].message : ''),
        j.state === 'running' || j.state === 'queued' ? h('button', {type: 'button', class: 'danger', onclick: async () => {
          try { await call('DELETE', '/v2/jobs/' + encodeURIComponent(j.id)); clear(status); } catch (e) {
            fill(status, errorBox(e));
          }
          refresh();
        }}, 'Cancel') : ''];
    }), {id: 'jobs-table'}));
  };
  await refresh();
  return every(2000, refresh);
}
