// "Try it": a form made from the model's metadata (GET /v2/models/{m}) -- numbers, text, an image, or the whole
// KServe v2 request as JSON -- sent to /v2/models/{m}[/versions/{v}]/infer; the answer, its version and latency.
import {call} from './api.js';
import {add, clear, errorBox, h, ms, table} from './dom.js';

const NUMERIC = new Set(['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16',
  'FP32', 'FP64', 'BF16']);

// The input's shape without its batch dimension (when the model batches), and whether it looks like an image:
// [C, H, W] / [H, W, C] with C 1 or 3, or [H, W] of at least 8x8.
function layout(input, batching, format) {
  const dims = batching ? input.shape.slice(1) : input.shape.slice();
  let image = null;
  const known = dims.every((d) => d > 0);
  if (known && NUMERIC.has(input.datatype)) {
    if (dims.length === 3 && (dims[0] === 1 || dims[0] === 3) && format !== 'FORMAT_NHWC') {
      image = {channels: dims[0], height: dims[1], width: dims[2], chw: true};
    } else if (dims.length === 3 && (dims[2] === 1 || dims[2] === 3)) {
      image = {channels: dims[2], height: dims[0], width: dims[1], chw: false};
    } else if (dims.length === 2 && dims[0] >= 8 && dims[1] >= 8) {
      image = {channels: 1, height: dims[0], width: dims[1], chw: true};
    }
  }
  return {dims, image};
}

// Numbers from "1, 2 3" or a (nested) JSON array.
export function parseNumbers(text) {
  const t = text.trim();
  if (!t) return [];
  if (t.startsWith('[')) return JSON.parse(t).flat(Infinity).map(Number);
  return t.split(/[\s,;]+/).filter(Boolean).map((v) => {
    const n = Number(v);
    if (Number.isNaN(n)) throw new Error('not a number: ' + v);
    return n;
  });
}

// The request shape for `count` values: the batch dimension 1, one unknown dimension worked out from the count.
function shapeFor(dims, batching, count) {
  const shape = dims.slice();
  const unknown = shape.filter((d) => d < 0).length;
  const fixed = shape.filter((d) => d > 0).reduce((a, b) => a * b, 1);
  if (unknown > 1) throw new Error('the input has ' + unknown + ' variable dimensions: use the JSON tab');
  if (unknown === 1) {
    if (count % fixed !== 0) throw new Error(count + ' values do not fill dimensions ' + JSON.stringify(dims));
    shape[shape.findIndex((d) => d < 0)] = count / fixed;
  } else if (fixed !== count) {
    throw new Error('the input takes ' + fixed + ' values, got ' + count);
  }
  return batching ? [1, ...shape] : shape;
}

async function imagePixels(file, img, scale) {
  const bitmap = await createImageBitmap(file);
  const canvas = new OffscreenCanvas(img.width, img.height);
  const g = canvas.getContext('2d');
  g.drawImage(bitmap, 0, 0, img.width, img.height);
  const rgba = g.getImageData(0, 0, img.width, img.height).data;
  const mean = [0.485, 0.456, 0.406];
  const std = [0.229, 0.224, 0.225];
  const n = img.width * img.height;
  const out = new Array(n * img.channels);
  for (let p = 0; p < n; p++) {
    for (let c = 0; c < img.channels; c++) {
      let v = img.channels === 1 ? (rgba[4 * p] + rgba[4 * p + 1] + rgba[4 * p + 2]) / 3 : rgba[4 * p + c];
      if (scale === 'unit') v /= 255;
      else if (scale === 'imagenet') v = (v / 255 - mean[c % 3]) / std[c % 3];
      out[img.chw ? c * n + p : p * img.channels + c] = v;
    }
  }
  return out;
}

function inputField(input, batching, format) {
  const {dims, image} = layout(input, batching, format);
  const id = 'tryit-input-' + input.name;
  const box = h('div', {class: 'card tryit-field', dataset: {input: input.name}});
  add(box, h('div', {}, h('b', {}, input.name), h('span', {class: 'muted'}, ' ' + input.datatype + ' ' +
    JSON.stringify(input.shape))));
  if (input.datatype === 'BYTES') {
    const text = h('textarea', {id, rows: 2, placeholder: 'text'});
    add(box, text);
    box.value = () => ({name: input.name, datatype: 'BYTES', shape: batching ? [1, 1] : [1], data: [text.value]});
    return box;
  }
  const text = h('textarea', {id, rows: 3, placeholder: 'numbers, e.g. 0, 1.5, 2 (or a JSON array)'});
  add(box, text);
  let file = null;
  let scale = null;
  if (image) {
    file = h('input', {type: 'file', accept: 'image/*', id: id + '-image'});
    scale = h('select', {}, h('option', {value: 'unit'}, 'pixels 0..1'), h('option', {value: 'raw'}, 'pixels 0..255'),
      h('option', {value: 'imagenet'}, 'ImageNet mean/std'));
    add(box, h('div', {class: 'row'}, 'or an image (' + image.width + 'x' + image.height + ', ' +
      (image.channels === 1 ? 'grey' : 'RGB') + '):', file, scale));
  }
  box.value = async () => {
    const data = file && file.files.length ? await imagePixels(file.files[0], image, scale.value)
      : parseNumbers(text.value);
    if (input.datatype === 'BOOL') return {name: input.name, datatype: 'BOOL', shape: shapeFor(dims, batching, data.length), data: data.map(Boolean)};
    return {name: input.name, datatype: input.datatype, shape: shapeFor(dims, batching, data.length), data};
  };
  return box;
}

function outputView(out) {
  const values = Array.isArray(out.data) ? out.data.flat(Infinity) : [];
  const el = h('div', {class: 'card tryit-output', id: 'tryit-output-' + out.name,
    dataset: {values: JSON.stringify(values.slice(0, 1000))}});
  add(el, h('div', {}, h('b', {}, out.name), h('span', {class: 'muted'}, ' ' + out.datatype + ' ' +
    JSON.stringify(out.shape))));
  const last = out.shape && out.shape.length ? out.shape[out.shape.length - 1] : values.length;
  if (out.datatype !== 'BYTES' && values.length === last && last > 1 && last <= 1000) {
    const top = values.map((v, i) => [i, v]).sort((a, b) => b[1] - a[1]).slice(0, 5);
    el.dataset.top1 = String(top[0][0]);
    add(el, table(['class', 'value'], top.map(([i, v]) => [String(i), String(v)]), {class: 'top'}));
  }
  add(el, h('pre', {}, values.length > 200 ? JSON.stringify(values.slice(0, 200)) + ' ... (' + values.length +
    ' values)' : JSON.stringify(out.data)));
  return el;
}

export function tryItForm(model, metadata, config, versions) {
  const batching = (config && config.max_batch_size > 0) || false;
  const format = (name) => ((config && config.input) || []).find((i) => i.name === name)?.format;
  const fields = metadata.inputs.map((i) => inputField(i, batching, format(i.name)));
  const version = h('select', {id: 'tryit-version'}, h('option', {value: ''}, 'default version'),
    versions.map((v) => h('option', {value: v}, 'version ' + v)));
  const json = h('textarea', {id: 'tryit-json', rows: 10});
  json.value = JSON.stringify({inputs: metadata.inputs.map((i) => ({name: i.name, datatype: i.datatype,
    shape: i.shape.map((d) => (d < 0 ? 1 : d)), data: []}))}, null, 1);
  const formTab = h('div', {}, fields);
  const jsonTab = h('div', {hidden: true}, json);
  const result = h('div', {id: 'tryit-result'});
  const submit = h('button', {type: 'button', class: 'primary', id: 'tryit-submit'}, 'Send');
  let useJson = false;
  const tabForm = h('button', {type: 'button', class: 'active'}, 'Form');
  const tabJson = h('button', {type: 'button'}, 'JSON');
  const setTab = (j) => {
    useJson = j;
    formTab.hidden = j;
    jsonTab.hidden = !j;
    tabForm.classList.toggle('active', !j);
    tabJson.classList.toggle('active', j);
  };
  tabForm.addEventListener('click', () => setTab(false));
  tabJson.addEventListener('click', () => setTab(true));
  submit.addEventListener('click', async () => {
    clear(result);
    submit.disabled = true;
    try {
      const body = useJson ? json.value : {inputs: await Promise.all(fields.map((f) => f.value()))};
      const path = '/v2/models/' + encodeURIComponent(model) + (version.value ? '/versions/' +
        encodeURIComponent(version.value) : '') + '/infer';
      const r = await call('POST', path, body);
      const served = r.headers.get('Inferd-Model-Version') || r.json.model_version || '';
      result.dataset.version = served;
      add(result, h('p', {id: 'tryit-latency'}, 'answered by version ' + served + ' in ' + ms(r.ms) +
        ' (measured here, network included)'), (r.json.outputs || []).map(outputView),
      h('details', {}, h('summary', {}, 'response JSON'), h('pre', {}, JSON.stringify(r.json, null, 1))));
    } catch (e) {
      add(result, errorBox(e));
    } finally {
      submit.disabled = false;
    }
  });
  return h('div', {class: 'tryit'}, h('div', {class: 'row tabs'}, tabForm, tabJson, version, submit), formTab,
    jsonTab, result);
}
