// Catalog: what serves (source, version, last reload error), the stored
// versions with who stored them, a version's document, the diff between
// two versions, and rollback to an earlier one. Routes: #/catalog,
// #/catalog/version/<n>, #/catalog/diff/<to>/<from>.
import { h, fill, field, table } from '../dom.js';

function rest() {
  return location.hash.split('/').slice(2).map(decodeURIComponent);
}

// diffView shows a unified diff, its added and removed lines marked (by
// class and by their leading + and -, so not by colour alone).
function diffView(text, label) {
  const lines = text.split('\n');
  return h('pre', { class: 'diff', id: 'catalog-diff', tabindex: 0, 'aria-label': label },
    lines.map((line) => {
      let cls = '';
      if (line.startsWith('+') && !line.startsWith('+++')) cls = 'add';
      else if (line.startsWith('-') && !line.startsWith('---')) cls = 'del';
      return h('span', { class: cls || false }, `${line}\n`);
    }));
}

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    const [st, versions] = await Promise.all([api.get('/admin/status'), api.get('/admin/catalog/versions')]);
    if (!ctx.shown()) return;
    const stored = st.source === 'store';
    root.append(h('h1', {}, t('catalog.title')),
      h('dl', { class: 'facts', id: 'catalog-status' },
        h('dt', {}, t('catalog.source')), h('dd', {}, st.source),
        h('dt', {}, t('catalog.serving')), h('dd', {}, st.stored_version ? t('catalog.stored_version', { n: st.stored_version }) : t('catalog.not_stored')),
        h('dt', {}, t('catalog.loaded_at')), h('dd', {}, fmt.date(st.loaded_at)),
        st.last_error ? [h('dt', {}, t('catalog.last_error')), h('dd', { class: 'error' }, `${st.last_error} (${fmt.date(st.last_error_at)})`)] : null));
    if (st.source.startsWith('file:')) {
      root.append(h('p', { class: 'card', id: 'catalog-file' }, t('catalog.from_file', { path: st.source.slice('file:'.length) })));
    } else if (!stored) {
      root.append(h('p', { class: 'card', id: 'catalog-file' }, t('catalog.not_stored_help')));
    }

    const [view, a, b] = rest();
    if (view === 'version' && a) {
      const doc = await api.text(`/admin/catalog/versions/${encodeURIComponent(a)}`);
      if (!ctx.shown()) return;
      root.append(h('p', {}, h('a', { href: '#/catalog' }, t('catalog.back'))), h('h2', {}, t('catalog.version_doc', { n: a })),
        h('pre', { id: 'catalog-doc', tabindex: 0, 'aria-label': t('catalog.version_doc', { n: a }) }, doc));
      return;
    }

    const rollback = async (v) => {
      if (!await ctx.confirm(t('catalog.confirm_rollback', { n: v.version }))) return;
      try {
        const now = await api.post(`/admin/catalog/versions/${v.version}/rollback`);
        ctx.toast(t('catalog.rolled_back', { n: v.version, now: now.stored_version }));
      } catch (e) {
        ctx.toast(e.message, 'error');
      }
      await ctx.rerender();
    };
    root.append(table(t('catalog.versions', { n: fmt.number(versions.length) }),
      [t('catalog.version'), t('catalog.at'), t('catalog.by'), t('catalog.size'), t('catalog.changes'), t('catalog.actions')],
      versions.map((v) => [
        h('span', {}, String(v.version), v.version === st.stored_version ? [' ', h('span', { class: 'badge good' }, t('catalog.serving_badge'))] : null),
        fmt.date(v.at), v.by || '—', t('catalog.bytes', { n: fmt.number(v.bytes) }),
        [t('catalog.lines', { added: fmt.number(v.lines_added), removed: fmt.number(v.lines_removed) }),
          v.rollback_of ? ` ${t('catalog.rollback_of', { n: v.rollback_of })}` : ''],
        h('div', { class: 'actions' },
          h('a', { href: `#/catalog/version/${v.version}` }, t('catalog.show', { n: v.version })),
          v.version > 1 ? h('a', { href: `#/catalog/diff/${v.version}/${v.version - 1}` }, t('catalog.show_diff', { n: v.version })) : null,
          ctx.canWrite && stored && v.version !== st.stored_version
            ? h('button', { type: 'button', class: 'write-only', onclick: () => rollback(v), 'data-version': v.version }, t('catalog.rollback', { n: v.version }))
            : null),
      ]), { id: 'catalog-versions' }));

    // Diff between any two versions.
    const choose = (id, value) => {
      const s = h('select', { id }, versions.map((v) => h('option', { value: v.version }, String(v.version))));
      if (value) s.value = value;
      return s;
    };
    const newest = versions.length ? versions[0].version : 0;
    const to = choose('catalog-diff-to', view === 'diff' ? a : newest);
    const from = choose('catalog-diff-from', view === 'diff' ? b : (newest > 1 ? newest - 1 : newest));
    const form = h('form', { class: 'filters', 'aria-label': t('catalog.compare') },
      field(t('catalog.from'), from), field(t('catalog.to'), to),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'catalog-compare' }, t('catalog.compare'))));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      location.hash = `#/catalog/diff/${to.value}/${from.value}`;
    });
    const out = h('div', {});
    root.append(h('h2', {}, t('catalog.compare')), versions.length ? form : h('p', { class: 'muted' }, t('catalog.no_versions')), out);
    if (view === 'diff' && a) {
      const text = await api.text(`/admin/catalog/versions/${encodeURIComponent(a)}/diff${api.query({ from: b })}`);
      if (!ctx.shown()) return;
      const label = t('catalog.diff_of', { from: b, to: a });
      fill(out, h('h3', {}, label), text.trim() ? diffView(text, label) : h('p', { id: 'catalog-diff' }, t('catalog.same')));
    }
  },
};
