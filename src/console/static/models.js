// Models: every model the server knows (GET /v2/repository/models): state and reason, versions, labels,
// memory, residency, the rollout; load and unload (explicit model control, admin token).
import {call, get} from './api.js';
import {add, badge, bytes, errorBox, every, fill, h, table} from './dom.js';

export function rolloutText(r) {
  if (!r) return '';
  return r.phase + ' ' + r.version + (r.phase === 'running' ? ' at ' + r.canary_percent + '% (step ' + r.step +
    ' of ' + r.steps + ')' : '') + (r.reason ? ': ' + r.reason : '');
}

export async function modelsPage(view) {
  const summary = h('p', {class: 'muted'});
  const filter = h('input', {type: 'search', placeholder: 'filter models', 'aria-label': 'filter models'});
  const status = h('div');
  const list = h('div');
  add(view, h('h2', {}, 'Models'), h('div', {class: 'row'}, filter, summary), status, list);
  let listing = null;

  const render = () => {
    if (!listing) return;
    const q = filter.value.trim().toLowerCase();
    const models = listing.models.filter((m) => !q || m.name.toLowerCase().includes(q));
    const loaded = listing.models.filter((m) => m.resident_bytes > 0).length;
    summary.textContent = listing.models.length + ' models, ' + loaded + ' loaded; residency ' + listing.residency +
      (listing.memory_budget_bytes ? ', budget ' + bytes(listing.memory_budget_bytes) : '') + '; ' +
      bytes(listing.resident_bytes) + ' resident';
    const rows = models.slice(0, 500).map((m) => [
      h('a', {href: '#/model/' + encodeURIComponent(m.name), class: 'model-link'}, m.name),
      h('span', {}, badge(m.state), m.reason ? h('div', {class: 'muted'}, m.reason) : null),
      m.backend || '-',
      m.default_version || '-',
      m.versions.map((v) => h('div', {}, v.version + ' ', badge(v.state))),
      Object.entries(m.labels || {}).map(([l, v]) => h('div', {}, l + ' \u2192 ' + v)),
      bytes(m.resident_bytes) + (m.pinned ? ' (pinned)' : ''),
      m.idle_ms < 0 ? 'not resident' : 'idle ' + (m.idle_ms / 1000).toFixed(1) + ' s',
      rolloutText(m.rollout),
      h('span', {class: 'row'},
        h('button', {type: 'button', onclick: () => act('load', m.name)}, 'Load'),
        h('button', {type: 'button', class: 'danger', onclick: () => act('unload', m.name)}, 'Unload')),
    ]);
    fill(list, table(['Model', 'State', 'Backend', 'Default', 'Versions', 'Labels', 'Memory', 'Residency',
      'Rollout', ''], rows, {id: 'models-table'}));
    if (models.length > 500) add(list, h('p', {class: 'muted'}, 'first 500 of ' + models.length + ' shown'));
  };

  const act = async (what, name) => {
    fill(status, h('p', {class: 'muted'}, what + 'ing ' + name + '...'));
    try {
      await call('POST', '/v2/repository/models/' + encodeURIComponent(name) + '/' + what, {});
      fill(status, h('p', {}, name + ': ' + what + 'ed'));
    } catch (e) {
      fill(status, errorBox(e));
    }
    await refresh();
  };

  const refresh = async () => {
    try {
      listing = await get('/v2/repository/models');
      render();
    } catch (e) {
      fill(list, errorBox(e));
    }
  };
  filter.addEventListener('input', render);
  await refresh();
  return every(3000, refresh);
}
