// Entitlements and profiles: the quota profiles the catalog declares (read
// only here), the end users' entitlements to them, and setting or removing
// an entitlement.
import { h, fill, field, table } from '../dom.js';

// utcDay is a date input's day as the start of that UTC day, or undefined.
const utcDay = (v) => (v ? `${v}T00:00:00Z` : undefined);

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    const profiles = await api.get('/admin/profiles');
    if (!ctx.shown()) return;
    const limit = (n) => (n ? fmt.number(n) : t('entitlements.unlimited'));
    const tasks = (m) => Object.entries(m).sort().map(([task, l]) =>
      t('entitlements.task_limit', { task, inflight: limit(l.max_inflight), daily: limit(l.daily_requests) })).join('; ') || '—';
    root.append(h('h1', {}, t('entitlements.title')),
      h('h2', {}, t('entitlements.profiles')),
      profiles.length ? table(t('entitlements.profiles_caption'),
        [t('entitlements.profile'), t('entitlements.max_inflight'), t('entitlements.rpm'), t('entitlements.tpm'),
          t('entitlements.daily_tokens'), t('entitlements.task_limits'), t('entitlements.priority_bonus'), t('entitlements.pool'),
          t('entitlements.default_for')],
        profiles.map((p) => [h('strong', {}, p.id), limit(p.user_limits.max_inflight), limit(p.user_limits.rpm),
          limit(p.user_limits.tpm), limit(p.user_limits.daily_tokens), tasks(p.task_limits), fmt.number(p.priority_bonus),
          p.pool || '—', p.default_for.join(', ') || '—']), { id: 'entitlements-profiles' })
        : h('p', { class: 'muted', id: 'entitlements-profiles' }, t('entitlements.no_profiles')));

    // Filters over the list.
    const ftenant = h('input', { id: 'ent-filter-tenant', type: 'text', autocomplete: 'off' });
    const fuser = h('input', { id: 'ent-filter-user', type: 'text', autocomplete: 'off' });
    const fprofile = h('select', { id: 'ent-filter-profile' }, h('option', { value: '' }, t('entitlements.any')),
      profiles.map((p) => h('option', { value: p.id }, p.id)));
    const filters = h('form', { class: 'filters', 'aria-label': t('entitlements.filters') },
      field(t('entitlements.tenant'), ftenant), field(t('entitlements.user'), fuser), field(t('entitlements.profile'), fprofile),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'ent-filter-apply' }, t('entitlements.apply'))));
    const list = h('div', {});
    root.append(h('h2', {}, t('entitlements.entitlements')), filters, list);

    const remove = async (e) => {
      if (!await ctx.confirm(t('entitlements.confirm_delete', { user: e.user, tenant: e.tenant }))) return;
      try {
        const r = await api.del('/admin/entitlements', { users: [{ tenant: e.tenant, user: e.user }] });
        ctx.toast(t('entitlements.deleted', { n: fmt.number(r.deleted) }));
      } catch (err) {
        ctx.toast(err.message, 'error');
      }
      await draw();
    };
    async function draw() {
      const es = await api.get(`/admin/entitlements${api.query({ tenant: ftenant.value.trim(), user: fuser.value.trim(), profile: fprofile.value })}`);
      if (!ctx.shown()) return;
      fill(list, table(t('entitlements.caption', { n: fmt.number(es.length) }),
        [t('entitlements.tenant'), t('entitlements.user'), t('entitlements.profile'), t('entitlements.pool'),
          t('entitlements.valid_from'), t('entitlements.valid_until'), t('entitlements.valid_now'), t('entitlements.updated'),
          ctx.canWrite ? t('entitlements.actions') : null].filter(Boolean),
        es.map((e) => [e.tenant, e.user, e.profile, e.pool || '—',
          e.valid_from ? fmt.date(e.valid_from) : t('entitlements.open'), e.valid_until ? fmt.date(e.valid_until) : t('entitlements.open'),
          e.valid_now ? h('span', { class: 'badge good' }, t('entitlements.yes')) : h('span', { class: 'badge warn' }, t('entitlements.no')),
          fmt.date(e.updated_at),
          ctx.canWrite ? h('button', { type: 'button', class: 'danger write-only', onclick: () => remove(e),
            'aria-label': t('entitlements.delete_of', { user: e.user, tenant: e.tenant }) }, t('entitlements.delete')) : null,
        ].filter((c) => c !== null)), { id: 'entitlements-list' }));
    }
    filters.addEventListener('submit', (e) => { e.preventDefault(); draw().catch((err) => ctx.toast(err.message, 'error')); });

    if (ctx.canWrite && profiles.length) root.append(setForm(ctx, profiles, draw));
    await draw();
  },
};

// setForm sets one end user's entitlement (replacing the one it has); its
// check button asks the API what the change would do without making it.
function setForm(ctx, profiles, changed) {
  const { t, api } = ctx;
  const tenant = h('input', { id: 'ent-tenant', type: 'text', required: true, autocomplete: 'off' });
  const user = h('input', { id: 'ent-user', type: 'text', required: true, autocomplete: 'off' });
  const profile = h('select', { id: 'ent-profile', required: true }, profiles.map((p) => h('option', { value: p.id }, p.id)));
  const pool = h('input', { id: 'ent-pool', type: 'text', autocomplete: 'off' });
  const from = h('input', { id: 'ent-from', type: 'date' });
  const until = h('input', { id: 'ent-until', type: 'date' });
  const body = (dryRun) => ({
    dry_run: dryRun,
    entitlements: [{ tenant: tenant.value.trim(), user: user.value.trim(), profile: profile.value, pool: pool.value.trim() || undefined,
      valid_from: utcDay(from.value), valid_until: utcDay(until.value) }],
  });
  const summary = (r) => t('entitlements.result', { created: r.created, replaced: r.replaced, unchanged: r.unchanged });
  const check = h('button', { type: 'button', id: 'ent-check' }, t('entitlements.check'));
  const form = h('form', { class: 'card write-only', id: 'ent-form' }, h('h2', {}, t('entitlements.set')),
    h('div', { class: 'filters' }, field(t('entitlements.tenant'), tenant), field(t('entitlements.user'), user),
      field(t('entitlements.profile'), profile), field(t('entitlements.pool_override'), pool),
      field(t('entitlements.valid_from_day'), from), field(t('entitlements.valid_until_day'), until)),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'ent-save' }, t('entitlements.save')), check));
  check.addEventListener('click', async () => {
    if (!form.reportValidity()) return;
    try { ctx.toast(t('entitlements.would', { result: summary(await api.put('/admin/entitlements', body(true))) })); } catch (e) { ctx.toast(e.message, 'error'); }
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      ctx.toast(summary(await api.put('/admin/entitlements', body(false))));
      form.reset();
      await changed();
    } catch (err) {
      ctx.toast(err.message, 'error');
    }
  });
  return form;
}
