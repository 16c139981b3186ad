// Audit log: every write the admin API served, by whom, with what answer,
// and what it changed — the state of each target before and after, shown
// as the fields that differ.
import { h, fill, field, table } from '../dom.js';

const LIMIT = 200;

// flatten maps each leaf of v to its path: {a: {b: 1}} → {"a.b": "1"}.
// Arrays are leaves (their order is their meaning); so are empty objects.
function flatten(v, path, out) {
  if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
    for (const [k, x] of Object.entries(v)) flatten(x, path ? `${path}.${k}` : k, out);
  } else if (v !== undefined) {
    out.set(path, JSON.stringify(v));
  }
  return out;
}

// changes lists the fields of before and after that differ, in path order.
export function changes(before, after) {
  const b = flatten(before ?? null, '', new Map());
  const a = flatten(after ?? null, '', new Map());
  const paths = [...new Set([...b.keys(), ...a.keys()])].sort();
  return paths.filter((p) => b.get(p) !== a.get(p)).map((p) => ({ path: p, before: b.get(p), after: a.get(p) }));
}

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    const action = h('input', { id: 'audit-action', type: 'text', autocomplete: 'off' });
    const target = h('input', { id: 'audit-target', type: 'text', autocomplete: 'off' });
    const form = h('form', { class: 'filters', 'aria-label': t('audit.filters') },
      field(t('audit.action'), action), field(t('audit.target'), target),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'audit-apply' }, t('audit.apply'))));
    const out = h('div', {});
    root.append(h('h1', {}, t('audit.title')), form, out);

    const diff = (e) => {
      const rows = changes(e.before, e.after);
      if (!rows.length) return h('span', { class: 'muted' }, t('audit.no_change'));
      return h('details', {}, h('summary', {}, t('audit.changed', { n: fmt.number(rows.length) })),
        h('table', { class: 'diff' },
          h('caption', {}, t('audit.diff_caption', { id: e.id })),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, t('audit.field')), h('th', { scope: 'col' }, t('audit.before')),
            h('th', { scope: 'col' }, t('audit.after')))),
          h('tbody', {}, rows.map((r) => h('tr', {}, h('th', { scope: 'row' }, h('code', {}, r.path)),
            h('td', { class: 'del' }, h('code', {}, r.before ?? '—')), h('td', { class: 'add' }, h('code', {}, r.after ?? '—')))))));
    };

    const draw = async () => {
      const list = await api.get(`/admin/audit${api.query({ action: action.value.trim(), target: target.value.trim(), limit: LIMIT })}`);
      if (!ctx.shown()) return;
      list.sort((a, b) => b.id - a.id);
      fill(out, table(t('audit.caption', { n: fmt.number(list.length) }),
        [t('audit.at'), t('audit.by'), t('audit.action'), t('audit.targets'), t('audit.status'), t('audit.changes')],
        list.map((e) => [fmt.date(e.at), `${e.token_id} (${e.remote || '—'})`, h('code', {}, e.action),
          e.targets.join(', ') || '—',
          e.status >= 400 ? h('span', { class: 'badge bad' }, `${e.status} ${e.error || ''}`) : h('span', { class: 'badge good' }, String(e.status)),
          diff(e)]), { id: 'audit-log' }),
      list.length === LIMIT ? h('p', { class: 'muted' }, t('audit.limited', { n: fmt.number(LIMIT) })) : null);
    };
    form.addEventListener('submit', (e) => { e.preventDefault(); draw().catch((err) => ctx.toast(err.message, 'error')); });
    await draw();
  },
};
