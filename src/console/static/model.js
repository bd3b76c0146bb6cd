// One model: versions, labels and rollback, traffic split and rollout (start, abort), live charts, and
// "try it" (or the chat playground for a generative model). Actions are the management routes (admin token).
import {call, get} from './api.js';
import {chatPlayground} from './chat.js';
import {add, badge, bytes, clear, errorBox, every, fill, h, table} from './dom.js';
import {modelCharts} from './live.js';
import {rolloutText} from './models.js';
import {tryItForm} from './tryit.js';

const enc = encodeURIComponent;

function trafficView(traffic) {
  const p = traffic.policy || {};
  const parts = [h('p', {class: 'muted'}, 'policy from ' + (traffic.source === 'runtime' ? 'the API (run time)'
    : traffic.source === 'config' ? 'config.pbtxt' : 'nowhere: the default version takes every request'))];
  if (p.split) {
    parts.push(table(['target', 'share', ''], Object.entries(p.split).map(([t, w]) =>
      [t, w + '%', h('div', {class: 'bar'}, h('div', {style: {width: w + '%'}}))]), {id: 'traffic-split'}));
  }
  if (p.shadow) parts.push(h('p', {}, 'shadow: ' + Object.entries(p.shadow).map(([t, w]) => t + ' ' + w + '%').join(', ')));
  if (p.sticky_key) parts.push(h('p', {}, 'sticky key: ' + p.sticky_key));
  return parts;
}

export async function modelPage(view, params, info) {
  const name = params[0] || '';
  const status = h('div', {id: 'action-status'});
  const head = h('div');
  const versionsBox = h('div');
  const trafficBox = h('div');
  const rolloutBox = h('div');
  const charts = info.live ? modelCharts() : null;
  const tryBox = h('div');
  const config = h('details', {}, h('summary', {}, 'Config'));
  add(view, h('p', {}, h('a', {href: '#/models'}, '\u2190 Models')), head, status,
    h('h3', {}, 'Versions and labels'), versionsBox,
    h('h3', {}, 'Traffic'), trafficBox, h('h3', {}, 'Rollout'), rolloutBox,
    charts ? [h('h3', {}, 'Live'), charts] : null, tryBox, config);
  let model = null;
  let onDemand = false;
  // Under on-demand residency a model that is not resident loads on its first request: the management routes
  // about its versions answer 503 until then, and the page loads it only when asked (Try it).
  const notResident = () => onDemand && model && model.state !== 'READY' && model.idle_ms < 0 &&
    (model.reason || '').startsWith('not resident');

  const act = async (what, method, path, body) => {
    fill(status, h('p', {class: 'muted'}, what + '...'));
    try {
      const r = await call(method, path, body);
      fill(status, h('p', {class: 'done'}, what + ': done'), h('pre', {}, JSON.stringify(r.json)));
    } catch (e) {
      fill(status, errorBox(e));
    }
    await refresh();
  };
  const base = '/v2/repository/models/' + enc(name);

  const renderVersions = () => {
    const labelsOf = (v) => Object.entries(model.labels || {}).filter(([, lv]) => lv === v).map(([l]) => l);
    const rows = model.versions.map((v) => [
      v.version + (v.version === model.default_version ? ' (default)' : ''),
      h('span', {}, badge(v.state), v.reason ? h('div', {class: 'muted'}, v.reason) : null),
      bytes(v.resident_bytes), v.load_seconds ? v.load_seconds.toFixed(2) + ' s' : '-',
      labelsOf(v.version).map((l) => h('span', {class: 'row'}, l, h('button', {type: 'button', class: 'danger',
        title: 'remove label ' + l, onclick: () => act('remove label ' + l, 'DELETE', base + '/labels/' + enc(l))},
      '\u00d7')))]);
    const label = h('input', {type: 'text', placeholder: 'label', id: 'label-name', size: 10});
    const version = h('select', {id: 'label-version'}, model.versions.map((v) => h('option', {value: v.version},
      v.version)));
    const confirm = h('button', {type: 'button', class: 'danger', id: 'rollback-confirm', hidden: true},
      'Confirm: make the previous default version the default');
    const rollback = h('button', {type: 'button', id: 'rollback'}, 'Roll back');
    rollback.addEventListener('click', () => { confirm.hidden = false; });
    confirm.addEventListener('click', () => act('roll back', 'POST', base + '/rollback', {}));
    fill(versionsBox, table(['version', 'state', 'memory', 'load', 'labels'], rows, {id: 'versions-table'}),
      h('div', {class: 'row'}, 'set label', label, 'to version', version,
        h('button', {type: 'button', id: 'label-set', onclick: () => label.value.trim() &&
          act('set label ' + label.value.trim(), 'PUT', base + '/labels/' + enc(label.value.trim()),
            {version: version.value})}, 'Set'), rollback, confirm));
  };

  const renderRollout = async () => {
    clear(rolloutBox);
    if (model.rollout) {
      add(rolloutBox, h('p', {id: 'rollout-state'}, badge(model.rollout.phase), ' ', rolloutText(model.rollout)));
      try {
        const r = await get(base + '/rollout');
        add(rolloutBox, h('ol', {}, (r.events || []).map((e) => h('li', {}, e))));
      } catch (e) { add(rolloutBox, errorBox(e)); }
      if (model.rollout.phase === 'running') {
        add(rolloutBox, h('button', {type: 'button', class: 'danger', id: 'rollout-abort',
          onclick: () => act('abort the rollout', 'DELETE', base + '/rollout')}, 'Abort rollout'));
      }
    }
    if (!model.rollout || model.rollout.phase !== 'running') {
      const version = h('select', {id: 'rollout-version'}, model.versions.map((v) => h('option', {value: v.version},
        v.version)));
      const steps = h('input', {type: 'text', value: '5,25,50,100', size: 12, id: 'rollout-steps'});
      const interval = h('input', {type: 'number', value: '60', min: '1', id: 'rollout-interval'});
      const minReq = h('input', {type: 'number', value: '100', min: '0', id: 'rollout-min-requests'});
      add(rolloutBox, h('div', {class: 'row'}, 'roll out version', version, 'steps (%)', steps,
        'interval (s)', interval, 'min requests', minReq,
        h('button', {type: 'button', id: 'rollout-start', onclick: () => act('start the rollout', 'POST',
          base + '/rollout', {version: version.value, steps: steps.value.split(',').map((s) => Number(s.trim())),
            interval_seconds: Number(interval.value), min_requests: Number(minReq.value)})}, 'Start')));
    }
  };

  const refresh = async () => {
    let listing;
    try {
      listing = await get('/v2/repository/models');
    } catch (e) {
      fill(head, errorBox(e));
      return;
    }
    onDemand = listing.residency === 'on-demand';
    model = listing.models.find((m) => m.name === name);
    if (!model) {
      fill(head, errorBox('no model ' + name));
      return;
    }
    fill(head, h('h2', {}, name, ' ', badge(model.state)),
      h('p', {class: 'muted'}, (model.backend || 'backend not known yet') + ' \u00b7 default version ' +
        (model.default_version || '-') + ' \u00b7 ' + bytes(model.resident_bytes) +
        (model.idle_ms < 0 ? ' \u00b7 not resident' : ' \u00b7 idle ' + (model.idle_ms / 1000).toFixed(1) + ' s')),
      model.reason ? h('p', {class: 'error'}, model.reason) : null);
    if (notResident()) {
      const later = 'shown once the model is resident (it loads on its first request)';
      fill(versionsBox, h('p', {class: 'muted'}, later));
      fill(trafficBox, h('p', {class: 'muted'}, later));
      fill(rolloutBox, h('p', {class: 'muted'}, later));
      return;
    }
    renderVersions();
    if (model.state !== 'READY') {
      fill(trafficBox, h('p', {class: 'muted'}, 'shown once the model serves'));
      fill(rolloutBox);
      return;
    }
    try {
      fill(trafficBox, trafficView(await get(base + '/traffic')));
    } catch (e) { fill(trafficBox, errorBox(e)); }
    await renderRollout();
  };

  const refreshCharts = async () => {
    if (!charts) return;
    try {
      const live = await get('/console/api/live?points=300&model=' + enc(name));
      charts.update(live.series);
    } catch (e) { /* the banner says why (401) */ }
  };

  await refresh();
  await refreshCharts();
  config.addEventListener('toggle', async () => {
    if (!config.open || config.dataset.loaded) return;
    config.dataset.loaded = '1';
    try {
      add(config, h('pre', {}, JSON.stringify(await get('/v2/models/' + enc(name) + '/config'), null, 1)));
    } catch (e) { add(config, errorBox(e)); }
  });
  // The form needs the model's metadata: asking for it loads a model that is not resident.
  const showTryIt = async () => {
    try {
      const metadata = await get('/v2/models/' + enc(name));
      const cfg = await get('/v2/models/' + enc(name) + '/config');
      if (notResident()) await refresh();
      const generative = model.backend === 'llm' || metadata.platform === 'llm_decoder';
      const versions = model.versions.filter((v) => v.state === 'READY').map((v) => v.version);
      fill(tryBox, h('h3', {}, generative ? 'Chat' : 'Try it'), generative ? chatPlayground(name)
        : tryItForm(name, metadata, cfg, versions));
    } catch (e) { add(tryBox, errorBox(e)); }
  };
  if (model && model.state === 'READY') {
    await showTryIt();
  } else if (notResident()) {
    add(tryBox, h('h3', {}, 'Try it'), h('button', {type: 'button', id: 'tryit-load', onclick: (e) => {
      e.target.disabled = true;
      showTryIt();
    }}, 'Load the model and try it'));
  }
  // A running rollout or a loading model changes by itself: follow it (the forms stay as typed otherwise).
  const follow = () => model && ((model.rollout && model.rollout.phase === 'running') || model.state === 'LOADING') &&
    refresh();
  const stops = [every(info.live ? info.live.interval_ms : 1000, refreshCharts), every(3000, follow)];
  return () => stops.forEach((stop) => stop());
}
