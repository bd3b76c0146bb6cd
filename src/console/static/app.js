// The console's shell: the pages (one module each) behind hash routes, the admin-token dialog, the server line.
import {ApiError, get, onUnauthorized, setToken, token} from './api.js';
import {add, clear, errorBox, h} from './dom.js';
import {clusterPage} from './cluster.js';
import {jobsPage} from './jobs.js';
import {livePage} from './live.js';
import {modelPage} from './model.js';
import {modelsPage} from './models.js';
import {tracesPage} from './traces.js';

const PAGES = {models: modelsPage, model: modelPage, live: livePage, jobs: jobsPage, cluster: clusterPage,
  traces: tracesPage};
const main = document.getElementById('main');
const banner = document.getElementById('banner');
let info = null;
let cleanup = null;

export function showBanner(text) {
  banner.textContent = text;
  banner.hidden = !text;
}

async function loadInfo() {
  try {
    info = await get('/console/api/info');
    document.getElementById('server-info').textContent = info.server.name + ' ' + info.server.version +
      (info.cluster ? ' \u00b7 cluster' : '') + (info.tracing ? ' \u00b7 tracing' : '');
    showBanner('');
  } catch (e) {
    info = null;
    if (!(e instanceof ApiError && e.status === 401)) showBanner(e.message);
  }
}

async function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  const hash = location.hash.replace(/^#\/?/, '') || 'models';
  const [name, ...rest] = hash.split('/');
  const page = PAGES[name] || modelsPage;
  for (const a of document.querySelectorAll('header nav a')) {
    a.classList.toggle('active', a.dataset.page === name || (name === 'model' && a.dataset.page === 'models'));
  }
  if (!info) await loadInfo();
  clear(main);
  if (!info) {
    add(main, h('p', {}, 'This server needs a token for every route (--auth-all-routes): enter it with ',
      h('b', {}, 'Token'), ' above.'));
    return;
  }
  const view = h('div', {class: 'page', dataset: {page: name}});
  add(main, view);
  try {
    cleanup = await page(view, rest.map(decodeURIComponent), info) || null;
  } catch (e) {
    add(view, errorBox(e));
  }
}

function setupToken() {
  const dialog = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  const button = document.getElementById('token-button');
  const label = () => { button.textContent = token() ? 'Token \u2713' : 'Token'; };
  label();
  button.addEventListener('click', () => { input.value = ''; dialog.showModal(); });
  dialog.addEventListener('close', async () => {
    if (dialog.returnValue === 'save' && input.value.trim()) setToken(input.value.trim());
    if (dialog.returnValue === 'forget') setToken('');
    input.value = '';
    label();
    if (dialog.returnValue !== 'cancel') { info = null; await route(); }
  });
  onUnauthorized(() => {
    showBanner(token() ? 'The server refused the token (401).' : 'This needs the admin token: click Token.');
  });
}

setupToken();
window.addEventListener('hashchange', route);
route();
