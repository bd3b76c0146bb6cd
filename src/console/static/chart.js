// A line chart on a canvas: times (unix ms) on x, lines [{label, values, color, dash}] on y from 0.
import {h} from './dom.js';

// One colour per model version (red is for errors).
export const COLORS = ['#2f6fde', '#1d8a4e', '#7b4fd6', '#17a2b8', '#b7791f', '#5a6270'];
export const ERROR_COLOR = '#c53030';

export function chartBox(title, unit) {
  const canvas = h('canvas', {width: 340, height: 140});
  const legend = h('div', {class: 'legend'});
  const box = h('div', {class: 'chart', dataset: {chart: title}}, h('div', {class: 'title'}, title,
    h('span', {class: 'muted'}, unit ? ' (' + unit + ')' : '')), canvas, legend);
  box.draw = (times, lines) => draw(canvas, legend, times, lines, unit);
  return box;
}

function fmt(v) {
  if (v >= 1000) return (v / 1000).toFixed(1) + 'k';
  if (v >= 10) return v.toFixed(0);
  return v.toFixed(v >= 1 ? 1 : 2);
}

function draw(canvas, legend, times, lines, unit) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 340;
  const hgt = canvas.clientHeight || 140;
  canvas.width = w * dpr;
  canvas.height = hgt * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, hgt);
  const left = 40, right = 8, top = 8, bottom = 18;
  let max = 0;
  for (const l of lines) for (const v of l.values) if (v > max) max = v;
  if (max <= 0) max = 1;
  max *= 1.1;
  g.strokeStyle = '#e6e9ef';
  g.fillStyle = '#6b7383';
  g.font = '10px system-ui, sans-serif';
  g.lineWidth = 1;
  for (let i = 0; i <= 3; i++) {
    const y = top + (hgt - top - bottom) * (1 - i / 3);
    g.beginPath(); g.moveTo(left, y); g.lineTo(w - right, y); g.stroke();
    g.fillText(fmt(max * i / 3), 2, y + 3);
  }
  const n = times.length;
  if (n > 1) {
    const span = (times[n - 1] - times[0]) / 1000;
    g.fillText('-' + Math.round(span) + ' s', left, hgt - 4);
    g.fillText('now', w - right - 20, hgt - 4);
  }
  const x = (i) => left + (w - left - right) * (n <= 1 ? 1 : i / (n - 1));
  const y = (v) => top + (hgt - top - bottom) * (1 - v / max);
  lines.forEach((l, k) => {
    g.strokeStyle = l.color || COLORS[k % COLORS.length];
    g.lineWidth = 1.5;
    g.setLineDash(l.dash ? [4, 3] : []);
    g.beginPath();
    l.values.forEach((v, i) => (i === 0 ? g.moveTo(x(i), y(v)) : g.lineTo(x(i), y(v))));
    g.stroke();
  });
  g.setLineDash([]);
  legend.replaceChildren(...lines.map((l, k) => {
    const last = l.values.length ? l.values[l.values.length - 1] : 0;
    return h('span', {style: {color: l.color || COLORS[k % COLORS.length]}}, (l.dash ? '- - ' : '') + l.label + ' ' + fmt(last) +
      (unit ? ' ' + unit : ''));
  }));
}
