// The chat playground of a generative model: the conversation goes to POST /v1/chat/completions with
// "stream": true and the answer shows as its chunks arrive, with the time to its first token.
import {stream} from './api.js';
import {add, errorBox, h, ms} from './dom.js';

export function chatPlayground(model) {
  const log = h('div', {class: 'chat-log', id: 'chat-log', 'aria-live': 'polite'});
  const system = h('input', {type: 'text', placeholder: 'system prompt (optional)', id: 'chat-system', size: 40});
  const input = h('textarea', {rows: 2, id: 'chat-input', placeholder: 'Say something'});
  const temperature = h('input', {type: 'number', id: 'chat-temperature', value: '0.7', min: '0', max: '2',
    step: '0.1'});
  const maxTokens = h('input', {type: 'number', id: 'chat-max-tokens', value: '128', min: '1', max: '32768'});
  const send = h('button', {type: 'button', class: 'primary', id: 'chat-send'}, 'Send');
  const stop = h('button', {type: 'button', id: 'chat-stop', disabled: true}, 'Stop');
  const clearButton = h('button', {type: 'button'}, 'Clear');
  const stats = h('p', {class: 'muted', id: 'chat-stats'});
  const history = [];
  let aborter = null;

  const run = async () => {
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    history.push({role: 'user', content: text});
    add(log, h('div', {class: 'msg user'}, 'you: ' + text));
    const answer = h('span', {class: 'answer'});
    const msg = h('div', {class: 'msg assistant', dataset: {chunks: '0', done: 'false'}}, model + ': ', answer);
    add(log, msg);
    const messages = (system.value.trim() ? [{role: 'system', content: system.value.trim()}] : []).concat(history);
    const body = {model, messages, stream: true, temperature: Number(temperature.value),
      max_tokens: Number(maxTokens.value)};
    aborter = new AbortController();
    send.disabled = true;
    stop.disabled = false;
    const t0 = performance.now();
    let first = null;
    let chunks = 0;
    let content = '';
    try {
      await stream('/v1/chat/completions', body, (ev) => {
        const delta = ev.choices && ev.choices[0] && ev.choices[0].delta;
        if (!delta || !delta.content) return;
        if (first === null) first = performance.now() - t0;
        chunks++;
        content += delta.content;
        answer.textContent = content;
        msg.dataset.chunks = String(chunks);
        log.scrollTop = log.scrollHeight;
      }, aborter.signal);
      history.push({role: 'assistant', content});
      const total = performance.now() - t0;
      stats.textContent = 'first token after ' + ms(first) + ', ' + chunks + ' chunks in ' + ms(total) +
        (total > (first || 0) && chunks > 1 ? ' (' + ((chunks - 1) / ((total - first) / 1000)).toFixed(1) +
          ' chunks/s after the first)' : '');
    } catch (e) {
      if (e.name !== 'AbortError') add(log, errorBox(e));
      else history.push({role: 'assistant', content});
    } finally {
      msg.dataset.done = 'true';
      send.disabled = false;
      stop.disabled = true;
      aborter = null;
    }
  };
  send.addEventListener('click', run);
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); run(); } });
  stop.addEventListener('click', () => aborter && aborter.abort());
  clearButton.addEventListener('click', () => { history.length = 0; log.replaceChildren(); stats.textContent = ''; });
  return h('div', {class: 'chat'}, h('div', {class: 'row'}, system, 'temperature', temperature, 'max tokens',
    maxTokens), log, input, h('div', {class: 'row'}, send, stop, clearButton), stats);
}
