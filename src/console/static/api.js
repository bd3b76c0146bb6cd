// The console's calls: the same REST routes as any client, with the admin token (if one was given) as a bearer
// token. The token lives in this tab's sessionStorage only.

const KEY = 'inferd.token';
const unauthorizedListeners = [];

export function token() { return sessionStorage.getItem(KEY) || ''; }
export function setToken(t) { if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY); }
export function onUnauthorized(f) { unauthorizedListeners.push(f); }

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function headers(body) {
  const hd = {};
  if (token()) hd['Authorization'] = 'Bearer ' + token();
  if (body !== undefined) hd['Content-Type'] = 'application/json';
  return hd;
}

// {json, text, ms, headers, status}; throws ApiError with the server's message on a non-2xx answer.
export async function call(method, path, body) {
  const init = {method, headers: headers(body), cache: 'no-store'};
  if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
  const t0 = performance.now();
  const res = await fetch(path, init);
  const text = await res.text();
  const elapsed = performance.now() - t0;
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (!res.ok) {
    if (res.status === 401) unauthorizedListeners.forEach((f) => f());
    throw new ApiError(res.status, (json && json.error) || text || res.statusText);
  }
  return {json, text, ms: elapsed, headers: res.headers, status: res.status};
}

export const get = async (path) => (await call('GET', path)).json;

// A POST answered with server-sent events: onEvent(parsed JSON) for each `data:` line until [DONE].
export async function stream(path, body, onEvent, signal) {
  const res = await fetch(path, {method: 'POST', headers: headers(body), body: JSON.stringify(body), signal});
  if (!res.ok) {
    const text = await res.text();
    let msg = text;
    try { msg = JSON.parse(text).error; if (typeof msg === 'object') msg = msg.message; } catch (e) { /* as text */ }
    if (res.status === 401) unauthorizedListeners.forEach((f) => f());
    throw new ApiError(res.status, msg || res.statusText);
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}
