// Jobs: the async jobs kept (video generation and other queued work),
// filtered by state, tenant and key; and one job's binding — the edge,
// credential and account it holds, its upstream ID — and its timeline.
// #/jobs lists; #/jobs/<id> shows one. Both follow the jobs live.
import { h, fill, field, table } from '../dom.js';

const DONE = ['completed', 'failed', 'cancelled', 'expired'];

function stateName(t, s) {
  const known = { queued: t('jobs.state_queued'), in_progress: t('jobs.state_in_progress'), completed: t('jobs.state_completed'),
    failed: t('jobs.state_failed'), cancelled: t('jobs.state_cancelled'), expired: t('jobs.state_expired') };
  return known[s] || s;
}

function badge(t, s) {
  let cls = 'warn';
  if (s === 'completed') cls = 'good';
  else if (DONE.includes(s)) cls = 'bad';
  return h('span', { class: `badge ${cls}` }, stateName(t, s));
}

export default {
  async render(root, ctx) {
    const id = decodeURIComponent(location.hash.split('/')[2] || '');
    if (id) detail(root, ctx, id);
    else list(root, ctx);
  },
};

function list(root, ctx) {
  const { t, fmt, api } = ctx;
  const state = h('select', { id: 'jobs-state' }, h('option', { value: '' }, t('jobs.any')),
    ['queued', 'in_progress', 'completed', 'failed', 'cancelled', 'expired'].map((s) => h('option', { value: s }, stateName(t, s))));
  const tenant = h('input', { id: 'jobs-tenant', type: 'text', autocomplete: 'off' });
  const key = h('input', { id: 'jobs-key', type: 'text', autocomplete: 'off' });
  const form = h('form', { class: 'filters', 'aria-label': t('jobs.filters') },
    field(t('jobs.state'), state), field(t('jobs.tenant'), tenant), field(t('jobs.key'), key),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'jobs-apply' }, t('jobs.apply'))));
  const out = h('div', {});
  root.append(h('h1', {}, t('jobs.title')), form, out);

  const draw = async () => {
    const jobs = await api.get(`/admin/jobs${api.query({ state: state.value, tenant: tenant.value.trim(), key: key.value.trim() })}`);
    if (!ctx.shown()) return;
    fill(out, table(t('jobs.caption', { n: fmt.number(jobs.length) }),
      [t('jobs.id'), t('jobs.state'), t('jobs.key'), t('jobs.tenant'), t('jobs.alias'), t('jobs.account'), t('jobs.queued'), t('jobs.took')],
      jobs.map((j) => [h('a', { href: `#/jobs/${encodeURIComponent(j.id)}` }, j.id), badge(t, j.state), j.key_id, j.tenant || '—',
        j.alias, j.account_id, fmt.date(j.queued), j.ended ? fmt.duration(Date.parse(j.ended) - Date.parse(j.queued)) : '—']),
      { id: 'jobs-list' }));
  };
  form.addEventListener('submit', (e) => { e.preventDefault(); draw().catch((err) => ctx.toast(err.message, 'error')); });
  ctx.every(2000, draw);
}

function detail(root, ctx, id) {
  const { t, fmt, api } = ctx;
  const body = h('div', { id: 'job' });
  root.append(h('p', {}, h('a', { href: '#/jobs' }, t('jobs.back'))), h('h1', {}, t('jobs.job', { id })), body);
  ctx.every(2000, async () => {
    const j = await api.get(`/admin/jobs/${encodeURIComponent(id)}`);
    if (!ctx.shown()) return;
    const facts = [
      [t('jobs.state'), badge(t, j.state)], [t('jobs.key'), j.key_id], [t('jobs.tenant'), j.tenant || '—'],
      [t('jobs.protocol'), j.protocol], [t('jobs.alias'), j.alias],
    ];
    const binding = [
      [t('jobs.edge'), j.edge_id], [t('jobs.credential'), j.credential_id], [t('jobs.account'), j.account_id],
      [t('jobs.endpoint'), j.endpoint_id], [t('jobs.upstream_id'), h('code', {}, j.upstream_id || '—')],
    ];
    // The timeline: each step, when, and how long after the one before.
    const steps = [['queued', j.queued], ['submitted', j.submitted], ['running', j.running], ['ended', j.ended]]
      .filter(([, at]) => at);
    const stepName = { queued: t('jobs.queued'), submitted: t('jobs.submitted'), running: t('jobs.running'), ended: t('jobs.ended') };
    const dl = (rows) => h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
    fill(body, dl(facts), h('h2', {}, t('jobs.binding')), dl(binding), h('h2', {}, t('jobs.timeline')),
      h('ol', { class: 'timeline', id: 'job-timeline' }, steps.map(([name, at], i) => h('li', {},
        h('strong', {}, stepName[name]), ' ', fmt.date(at),
        i ? ` (${t('jobs.after', { d: fmt.duration(Date.parse(at) - Date.parse(steps[i - 1][1])) })})` : ''))),
      j.next_poll ? h('p', { class: 'muted' }, t('jobs.next_poll', { at: fmt.date(j.next_poll) })) : null);
  });
}
