// Live: requests/s, p50/p99 latency and queue time per model version, from the server's own ring buffers
// (GET /console/api/live: one point a second). The model page shows the same charts for one model.
import {get} from './api.js';
import {chartBox, COLORS, ERROR_COLOR} from './chart.js';
import {add, clear, errorBox, every, fill, h} from './dom.js';

// Three charts for the series of one model (a line per version).
export function modelCharts() {
  const rps = chartBox('Requests', 'req/s');
  const latency = chartBox('Latency', 'ms');
  const queue = chartBox('Queue time', 'ms');
  const el = h('div', {class: 'charts'}, rps, latency, queue);
  el.update = (series) => {
    if (!series.length) return;
    const times = series[0].t;
    const color = (k) => COLORS[k % COLORS.length];
    rps.draw(times, series.flatMap((s, k) => [
      {label: 'v' + s.version, values: s.rps, color: color(k)},
      {label: 'v' + s.version + ' errors', values: s.errors_ps, color: ERROR_COLOR, dash: true}]));
    latency.draw(times, series.flatMap((s, k) => [
      {label: 'v' + s.version + ' p50', values: s.p50_ms, color: color(k)},
      {label: 'v' + s.version + ' p99', values: s.p99_ms, color: color(k), dash: true}]));
    queue.draw(times, series.map((s, k) => ({label: 'v' + s.version, values: s.queue_ms, color: color(k)})));
  };
  return el;
}

export async function livePage(view, params, info) {
  add(view, h('h2', {}, 'Live'));
  if (!info.live) {
    add(view, h('p', {class: 'muted'}, 'The charts are off on this server.'));
    return null;
  }
  const note = h('p', {class: 'muted'}, 'The last ' + Math.round(info.live.history * info.live.interval_ms / 1000) +
    ' s of every model version with traffic, one point a second (idle models are not listed).');
  const body = h('div');
  add(view, note, body);
  const boxes = new Map();
  const refresh = async () => {
    let live;
    try {
      live = await get('/console/api/live?points=120');
    } catch (e) {
      fill(body, errorBox(e));
      boxes.clear();
      return;
    }
    const byModel = new Map();
    for (const s of live.series) {
      if (!s.rps.some((v) => v > 0)) continue;
      if (!byModel.has(s.model)) byModel.set(s.model, []);
      byModel.get(s.model).push(s);
    }
    if (!byModel.size) {
      fill(body, h('p', {class: 'muted', id: 'live-empty'}, 'No requests in the last two minutes.'));
      boxes.clear();
      return;
    }
    if (!boxes.size) clear(body);
    for (const [model, series] of byModel) {
      if (!boxes.has(model)) {
        const charts = modelCharts();
        const box = h('div', {class: 'card', dataset: {model}},
          h('h3', {}, h('a', {href: '#/model/' + encodeURIComponent(model)}, model)), charts);
        boxes.set(model, {box, charts});
        add(body, box);
      }
      boxes.get(model).charts.update(series);
    }
    for (const [model, b] of boxes) {
      if (!byModel.has(model)) { b.box.remove(); boxes.delete(model); }
    }
  };
  await refresh();
  return every(info.live.interval_ms, refresh);
}
