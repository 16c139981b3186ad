// Overview: what is serving (catalog version, replicas, counts). The
// request, error, latency, token and spend charts come with the usage
// summary.
import { h, table } from '../dom.js';

export default {
  async render(root, ctx) {
    const { t, fmt } = ctx;
    const head = h('h1', {}, t('overview.title'));
    const body = h('div', {});
    root.append(head, body);
    ctx.every(5000, async () => {
      const st = await ctx.api.get('/admin/status');
      if (!ctx.shown()) return;
      body.replaceChildren(
        h('dl', { class: 'facts' },
          h('dt', {}, t('overview.catalog_version')), h('dd', { id: 'catalog-version' }, String(st.stored_version || st.version)),
          h('dt', {}, t('overview.catalog_source')), h('dd', {}, st.source || '—'),
          h('dt', {}, t('overview.loaded_at')), h('dd', {}, fmt.date(st.loaded_at))),
        table(t('overview.replicas'), [t('overview.replica'), t('overview.replica_version'), t('overview.replica_seen')],
          (st.replicas || []).map((r) => [r.id || r.replica || '—', String(r.stored_version ?? r.version ?? '—'), fmt.date(r.seen_at || r.heartbeat_at)])));
    });
  },
};
