// Building the page. Text goes in as text nodes, never as HTML, so nothing
// the API returns can run as markup.

// h makes an element: h('button', {type: 'button', onclick: fn}, 'Save').
// Attributes starting with "on" are listeners; class, for and data-* are
// set as attributes; false, null and undefined attributes are left out.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and fills it with children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// table makes an accessible table: caption, column headers and rows of
// cells (strings or nodes).
export function table(caption, headers, rows, attrs) {
  return h('table', attrs || {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

let ids = 0;
// field makes a labelled input: a label bound to the control by id.
export function field(label, control) {
  if (!control.id) control.id = `f${++ids}`;
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
}
