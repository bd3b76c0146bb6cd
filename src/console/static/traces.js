// The last traced requests (GET /console/api/traces: OTLP JSON, newest first), each a waterfall of its spans.
import {get} from './api.js';
import {add, errorBox, every, fill, h, ms, table} from './dom.js';

function value(v) {
  if (!v) return '';
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return String(v.intValue);
  if ('doubleValue' in v) return String(v.doubleValue);
  if ('boolValue' in v) return String(v.boolValue);
  return JSON.stringify(v);
}

function attrs(span) {
  const out = {};
  for (const a of span.attributes || []) out[a.key] = value(a.value);
  return out;
}

// Spans grouped by trace, in the order they came (newest request first).
function group(otlp) {
  const traces = new Map();
  for (const rs of otlp.resourceSpans || []) {
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        if (!traces.has(s.traceId)) traces.set(s.traceId, []);
        traces.get(s.traceId).push(s);
      }
    }
  }
  return [...traces.entries()].map(([id, spans]) => {
    const ids = new Set(spans.map((s) => s.spanId));
    const root = spans.find((s) => !s.parentSpanId || !ids.has(s.parentSpanId)) || spans[0];
    return {id, spans, root};
  });
}

function waterfall(t) {
  const start = Math.min(...t.spans.map((s) => Number(BigInt(s.startTimeUnixNano) / 1000n)));
  const end = Math.max(...t.spans.map((s) => Number(BigInt(s.endTimeUnixNano) / 1000n)));
  const total = Math.max(end - start, 1);
  const depth = new Map();
  const byId = new Map(t.spans.map((s) => [s.spanId, s]));
  const depthOf = (s) => {
    if (depth.has(s.spanId)) return depth.get(s.spanId);
    const p = s.parentSpanId && byId.get(s.parentSpanId);
    const d = p && p !== s ? depthOf(p) + 1 : 0;
    depth.set(s.spanId, d);
    return d;
  };
  const spans = t.spans.slice().sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
  return table(['span', 'duration', '', 'attributes'], spans.map((s) => {
    const s0 = Number(BigInt(s.startTimeUnixNano) / 1000n) - start;
    const len = Number(BigInt(s.endTimeUnixNano) / 1000n) - start - s0;
    const error = s.status && s.status.code === 2;
    return [h('span', {style: {paddingLeft: depthOf(s) + 'em'}}, s.name), ms(len / 1000),
      h('div', {class: 'waterfall'}, h('div', {class: error ? 'error' : '', style: {left: (100 * s0 / total) + '%',
        width: Math.max(100 * len / total, 0.5) + '%'}})),
      h('span', {class: 'muted'}, Object.entries(attrs(s)).map(([k, v]) => k + '=' + v).join(' ') +
        (error && s.status.message ? ' error: ' + s.status.message : ''))];
  }), {class: 'trace-spans'});
}

export async function tracesPage(view, params, info) {
  add(view, h('h2', {}, 'Last traced requests'));
  if (!info.tracing) {
    add(view, h('p', {class: 'muted', id: 'traces-off'}, 'Tracing is off. Start inferd with --trace-config ' +
      'mode=opentelemetry (and rate=N: one request in N) to see traced requests here (docs/observability.md).'));
    return null;
  }
  add(view, h('p', {class: 'muted'}, 'Up to ' + info.recent_traces + ' of the traced requests (at most 10 a ' +
    'second), kept in the server\'s memory; the collector gets all of them.'));
  const list = h('div');
  const detail = h('div');
  add(view, detail, list);
  let selected = null;
  const refresh = async () => {
    let traces;
    try {
      traces = group(await get('/console/api/traces?limit=50'));
    } catch (e) {
      fill(list, errorBox(e));
      return;
    }
    if (!traces.length) {
      fill(list, h('p', {class: 'muted', id: 'traces-empty'}, 'No traced request yet.'));
      return;
    }
    fill(list, table(['time', 'request', 'model', 'status', 'duration', 'spans', 'trace id'],
      traces.map((t) => {
        const a = attrs(t.root);
        const started = Number(BigInt(t.root.startTimeUnixNano) / 1000000n);
        const dur = Number(BigInt(t.root.endTimeUnixNano) - BigInt(t.root.startTimeUnixNano)) / 1e6;
        return [new Date(started).toLocaleTimeString(), h('a', {href: '#/traces', onclick: (e) => {
          e.preventDefault(); selected = t.id; fill(detail, h('h3', {}, 'Trace ' + t.id), waterfall(t));
        }}, t.root.name + ' ' + (a['url.path'] || a['rpc.method'] || '')), a['triton.model_name'] || '',
        a['http.response.status_code'] || a['rpc.grpc.status_code'] || (t.root.status && t.root.status.code === 2 ? 'error' : 'ok'),
        ms(dur), String(t.spans.length), t.id];
      }), {id: 'traces-table'}));
    if (selected) {
      const t = traces.find((x) => x.id === selected);
      if (t) fill(detail, h('h3', {}, 'Trace ' + t.id), waterfall(t));
    }
  };
  await refresh();
  return every(3000, refresh);
}
