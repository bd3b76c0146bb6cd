// Small DOM helpers. Text from the server is always set as text (never as HTML).

// h('div', {class: 'x', onclick: f}, 'text', child, [more]): an element.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') Object.assign(el.style, v);  // CSSOM: the page's policy allows no inline style text
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Appends children as h() does (text as text; arrays flattened; null, undefined and false left out).
export function add(el, ...children) {
  append(el, children);
  return el;
}

// Replaces the children.
export function fill(el, ...children) {
  return add(clear(el), ...children);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function badge(text) {
  return h('span', {class: 'badge ' + String(text)}, text);
}

export function bytes(n) {
  if (!n) return '0 B';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

export function ms(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '-';
  return v < 10 ? v.toFixed(2) + ' ms' : v < 1000 ? v.toFixed(1) + ' ms' : (v / 1000).toFixed(2) + ' s';
}

export function errorBox(err) {
  return h('div', {class: 'error', role: 'alert'}, err && err.message ? err.message : String(err));
}

// A table: head = column names, rows = arrays of cells (text or nodes).
export function table(head, rows, attrs) {
  return h('table', attrs, h('thead', {}, h('tr', {}, head.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

// Calls `f` every `ms` while the page is visible (a console left open in a background tab costs the server
// nothing); returns the stop function a page gives back to the router.
export function every(ms, f) {
  const timer = setInterval(() => { if (!document.hidden) f(); }, ms);
  return () => clearInterval(timer);
}
