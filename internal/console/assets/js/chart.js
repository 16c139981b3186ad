// Small SVG charts built through the DOM (no inline script or style, so the
// strict Content-Security-Policy holds). Each chart is an image with a
// title for screen readers; the page shows the same numbers in a table.

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const W = 640;
const H = 200;
const PAD = { l: 56, r: 12, t: 12, b: 28 };

// scale maps [d0, d1] onto [r0, r1].
function scale(d0, d1, r0, r1) {
  const span = d1 - d0 || 1;
  return (v) => r0 + ((v - d0) / span) * (r1 - r0);
}

// lineChart draws series ({name, points: [{x: ms since epoch, y}]}) over
// time. opts: title (the accessible name), xLabel (ms → text), yLabel
// (value → text), stacked bars instead of lines when bars is true.
export function lineChart(series, opts) {
  const pts = series.flatMap((x) => x.points);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart', 'aria-label': opts.title });
  svg.append(s('title', {}, opts.title));
  if (pts.length === 0) {
    svg.append(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, opts.empty || ''));
    return svg;
  }
  const xs = pts.map((p) => p.x);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const y1 = Math.max(1e-9, ...pts.map((p) => p.y));
  const X = scale(x0, x1, PAD.l, W - PAD.r);
  const Y = scale(0, y1, H - PAD.b, PAD.t);
  for (let i = 0; i <= 4; i++) {
    const v = (y1 * i) / 4;
    svg.append(s('line', { x1: PAD.l, x2: W - PAD.r, y1: Y(v), y2: Y(v), class: 'grid' }));
    svg.append(s('text', { x: PAD.l - 6, y: Y(v) + 4, 'text-anchor': 'end', class: 'tick' }, opts.yLabel(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const v = x0 + ((x1 - x0) * i) / 4;
    svg.append(s('text', { x: X(v), y: H - 8, 'text-anchor': 'middle', class: 'tick' }, opts.xLabel(v)));
  }
  series.forEach((ser, i) => {
    const cls = `series s${i % 6}`;
    if (ser.points.length === 1) {
      const p = ser.points[0];
      svg.append(s('circle', { cx: X(p.x), cy: Y(p.y), r: 3, class: cls }));
      return;
    }
    const d = ser.points.map((p, j) => `${j ? 'L' : 'M'}${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join('');
    svg.append(s('path', { d, class: cls, fill: 'none' }));
  });
  return svg;
}

// legend names the series in their colours.
export function legend(series) {
  const ul = document.createElement('ul');
  ul.className = 'legend';
  series.forEach((ser, i) => {
    const li = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = `swatch s${i % 6}`;
    sw.setAttribute('aria-hidden', 'true');
    li.append(sw, document.createTextNode(ser.name));
    ul.append(li);
  });
  return ul;
}

// meter draws used of total as a bar (in flight vs cap, say).
export function meter(used, total, label) {
  const m = document.createElement('meter');
  m.min = 0;
  m.max = Math.max(total, 1);
  m.value = Math.min(used, m.max);
  m.high = m.max * 0.8;
  m.setAttribute('aria-label', label);
  m.title = label;
  return m;
}
