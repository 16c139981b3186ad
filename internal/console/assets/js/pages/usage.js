// Usage: the request records of a time range, narrowed by tenant, key,
// alias, model, end user, task type and code; their cached-token share;
// the prompt-cache report; whether requests ran on the accounts their keys'
// policies expected; and the same records as CSV. The filters live in the
// route (#/usage/key=web&alias=fast), so a filtered view can be reloaded
// and shared.
import { fmt } from '../i18n.js';
import { h, fill, field, table } from '../dom.js';

const RANGES = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, '30d': 30 * 86400e3 };
const TEXT_FILTERS = ['tenant', 'key', 'alias', 'model', 'end_user', 'task_type', 'code'];
const LIMIT = 200;

function filtersOfRoute() {
  const rest = location.hash.split('/').slice(2).join('/');
  return new URLSearchParams(rest);
}

// span is [since, until) of the range chosen, as the API's RFC 3339.
function span(range) {
  const until = Date.now();
  return { since: new Date(until - (RANGES[range] || RANGES['24h'])).toISOString(), until: new Date(until).toISOString() };
}

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    const chosen = filtersOfRoute();
    const labels = {
      tenant: t('usage.tenant'), key: t('usage.key'), alias: t('usage.alias'), model: t('usage.model'),
      end_user: t('usage.end_user'), task_type: t('usage.task_type'), code: t('usage.code'),
    };
    const range = h('select', { id: 'usage-range' },
      h('option', { value: '1h' }, t('usage.range_1h')), h('option', { value: '24h' }, t('usage.range_24h')),
      h('option', { value: '7d' }, t('usage.range_7d')), h('option', { value: '30d' }, t('usage.range_30d')));
    range.value = RANGES[chosen.get('range')] ? chosen.get('range') : '24h';
    const inputs = Object.fromEntries(TEXT_FILTERS.map((name) =>
      [name, h('input', { id: `usage-${name}`, type: 'text', value: chosen.get(name) || '', autocomplete: 'off' })]));
    inputs.code.setAttribute('placeholder', t('usage.code_hint'));
    const apply = h('button', { type: 'submit', class: 'primary', id: 'usage-apply' }, t('usage.apply'));
    const clear = h('button', { type: 'button', onclick: () => { location.hash = '#/usage'; } }, t('usage.clear'));
    const form = h('form', { class: 'filters', id: 'usage-filters', 'aria-label': t('usage.filters') },
      field(t('usage.range'), range), TEXT_FILTERS.map((name) => field(labels[name], inputs[name])), h('div', { class: 'actions' }, apply, clear));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const q = new URLSearchParams({ range: range.value });
      for (const name of TEXT_FILTERS) if (inputs[name].value.trim()) q.set(name, inputs[name].value.trim());
      location.hash = `#/usage/${q}`;
    });

    const { since, until } = span(range.value);
    const params = { since, until, limit: LIMIT };
    for (const name of TEXT_FILTERS) params[name] = chosen.get(name) || '';
    const listPath = `/admin/usage${api.query(params)}`;
    const csvPath = `/admin/usage${api.query({ ...params, format: 'csv' })}`;

    const stats = h('div', { class: 'cards', id: 'usage-stats' });
    const records = h('div', {});
    const cache = h('div', {});
    const policy = h('div', {});
    root.append(h('h1', {}, t('usage.title')), form,
      h('p', {}, h('a', { href: csvPath, download: 'usage.csv', id: 'usage-csv' }, t('usage.export_csv'))),
      stats, records, h('h2', {}, t('usage.cache')), cache, h('h2', {}, t('usage.policy')), policy);

    const [list, cacheRep, policyRep] = await Promise.all([
      api.get(listPath),
      api.get(`/admin/usage/cache${api.query({ from: since, to: until })}`),
      api.get(`/admin/usage/policy${api.query({ from: since, to: until, key: chosen.get('key') || '' })}`),
    ]);
    if (!ctx.shown()) return;

    const prompt = list.reduce((n, r) => n + r.usage.prompt_tokens, 0);
    const cached = list.reduce((n, r) => n + r.usage.cached_tokens, 0);
    const errors = list.filter((r) => r.code).length;
    const stat = (label, value) => h('div', { class: 'stat' }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
    fill(stats, stat(t('usage.records'), fmt.number(list.length)), stat(t('usage.errors'), fmt.number(errors)),
      stat(t('usage.prompt_tokens'), fmt.number(prompt)), stat(t('usage.cached_share'), fmt.percent(prompt ? cached / prompt : null)));

    fill(records, table(t('usage.records_caption', { n: fmt.number(list.length) }),
      [t('usage.started'), t('usage.request_id'), t('usage.key'), t('usage.tenant'), t('usage.end_user'), t('usage.task_type'),
        t('usage.alias'), t('usage.model'), t('usage.status'), t('usage.code'), t('usage.prompt_tokens'), t('usage.completion_tokens'),
        t('usage.cached_tokens'), t('usage.latency'), t('usage.ttft'), t('usage.price')],
      list.slice().reverse().map((r) => [fmt.date(r.started), h('code', {}, r.request_id), r.key_id, r.tenant, r.end_user || '—',
        r.task_type || '—', r.alias, r.model || '—', String(r.status), r.code || t('usage.ok'), fmt.number(r.usage.prompt_tokens),
        fmt.number(r.usage.completion_tokens), fmt.number(r.usage.cached_tokens), fmt.duration(r.latency_ms),
        r.ttft_ms ? fmt.duration(r.ttft_ms) : '—', r.billing_account ? fmt.money(fmt.micros(r.price || '0')) : '—']),
      { id: 'usage-records' }),
    list.length === LIMIT ? h('p', { class: 'muted' }, t('usage.limited', { n: fmt.number(LIMIT) })) : null);

    const placements = (a) => t('usage.placements', { hits: fmt.number(a.hits), new: fmt.number(a.new), moved: fmt.number(a.moved) });
    fill(cache, table(t('usage.cache_caption'),
      [t('usage.account'), t('usage.alias'), t('usage.requests'), t('usage.prompt_tokens'), t('usage.cached_tokens'),
        t('usage.cache_write_tokens'), t('usage.cached_share'), t('usage.affinity')],
      [...cacheRep.rows, { ...cacheRep.total, account_id: t('usage.total') }].map((r) => [r.account_id || '—', r.alias || '—',
        fmt.number(r.requests), fmt.number(r.prompt_tokens), fmt.number(r.cached_tokens), fmt.number(r.cache_write_tokens),
        fmt.percent(r.cached_share), placements(r.affinity)]), { id: 'usage-cache' }));

    const reasons = (m) => Object.entries(m || {}).map(([k, n]) => `${k}: ${fmt.number(n)}`).join(', ') || '—';
    const rows = policyRep.keys.flatMap((k) => [
      [h('strong', {}, k.key_id), k.expected.length ? k.expected.join(', ') : t('usage.any_account'), '',
        fmt.number(k.executions), fmt.number(k.on_expected), fmt.number(k.fallbacks), reasons(k.fallback_reasons)],
      ...k.accounts.map((a) => ['', '', `${a.account_id} / ${a.credential_id}`, fmt.number(a.executions),
        fmt.number(a.on_expected), fmt.number(a.fallbacks), reasons(a.fallback_reasons)]),
    ]);
    fill(policy, table(t('usage.policy_caption'),
      [t('usage.key'), t('usage.expected'), t('usage.ran_on'), t('usage.executions'), t('usage.on_expected'),
        t('usage.fallbacks'), t('usage.fallback_reasons')], rows, { id: 'usage-policy' }));
  },
};
