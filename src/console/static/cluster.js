// Cluster mode: this node's view of the members (GET /v2/cluster): health, models, memory, requests in flight.
import {get} from './api.js';
import {add, badge, bytes, errorBox, every, fill, h, table} from './dom.js';

export async function clusterPage(view, params, info) {
  add(view, h('h2', {}, 'Cluster'));
  if (!info.cluster) {
    add(view, h('p', {class: 'muted', id: 'cluster-single'}, 'This server runs alone (start it with --cluster ' +
      'etcd://HOST:PORT to join a cluster; docs/cluster.md).'));
    return null;
  }
  const summary = h('p', {class: 'muted'});
  const body = h('div');
  add(view, summary, body);
  const refresh = async () => {
    let c;
    try {
      c = await get('/v2/cluster');
    } catch (e) {
      fill(body, errorBox(e));
      return;
    }
    summary.textContent = 'this node: ' + c.self + '; registry ' + (c.store_reachable ? 'reachable' : 'NOT reachable') +
      '; view ' + c.view_age_ms + ' ms old; ' + c.models + ' models placed';
    fill(body, table(['node', 'health', 'HTTP', 'gRPC', 'models', 'memory', 'in flight', 'up since'],
      c.nodes.map((n) => [n.id + (n.self ? ' (this node)' : ''), badge(n.health === 'up' ? 'alive' : n.health),
        n.http, n.grpc || '-', String(n.models), bytes(n.used_bytes) + (n.budget_bytes ? ' of ' + bytes(n.budget_bytes) : ' (no budget)'),
        String(n.in_flight), new Date(n.started_unix_ms).toLocaleString()]), {id: 'cluster-table'}));
  };
  await refresh();
  return every(2000, refresh);
}
