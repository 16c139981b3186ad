// Money: billing accounts (balance, allowance, budgets, suspension), one
// account's statement with top-up, adjustment, refund, suspend and resume,
// the price versions, and spend with its margin by a chosen dimension.
// #/money lists; #/money/<account> shows one account.
import { fmt } from '../i18n.js';
import { h, fill, field, table } from '../dom.js';
import { lineChart, legend, meter } from '../chart.js';

// idempotencyKey names one submission. crypto.randomUUID exists only in
// secure contexts, and an admin listener is often plain HTTP on a private
// address; getRandomValues exists everywhere.
function idempotencyKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

const account = () => decodeURIComponent(location.hash.split('/')[2] || '');

const SPEND_BY = ['account', 'key', 'alias', 'model', 'day'];

function byName(t, d) {
  return { account: t('money.by_account'), key: t('money.by_key'), alias: t('money.by_alias'), model: t('money.by_model'),
    day: t('money.by_day') }[d];
}

function sourceName(t, source) {
  return source === 'catalog' ? t('money.source_catalog') : t('money.source_api');
}

// entryKind names a ledger entry's kind; one the console does not know
// shows as it is.
function entryKind(t, kind) {
  const known = { topup: t('money.kind_topup'), adjustment: t('money.kind_adjustment'), refund: t('money.kind_refund'),
    charge: t('money.kind_charge'), allowance: t('money.kind_allowance') };
  return known[kind] || kind;
}

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    // Every amount is in the deployment's one currency, which the spend
    // report names; asked of the last minute, it sums next to nothing.
    const lately = new Date(Date.now() - 60000).toISOString();
    const currency = (await api.get(`/admin/billing/spend${api.query({ from: lately })}`)).currency;
    const money = (v) => fmt.money(fmt.micros(v), currency);
    const id = account();
    if (id) await detail(root, ctx, id, money);
    else await overview(root, ctx, money);
  },
};

function suspendedBadge(t, a) {
  return a.suspension
    ? h('span', { class: 'badge bad', title: a.suspension.reason }, t('money.suspended'))
    : h('span', { class: 'badge good' }, t('money.active'));
}

async function overview(root, ctx, money) {
  const { t, fmt, api } = ctx;
  const accounts = h('div', {});
  const prices = h('div', {});
  const spend = h('div', {});
  root.append(h('h1', {}, t('money.title')), accounts, h('h2', {}, t('money.prices')), prices,
    h('h2', {}, t('money.spend')), spend);

  ctx.every(5000, async () => {
    const list = await api.get('/admin/billing/accounts');
    if (!ctx.shown()) return;
    fill(accounts, table(t('money.accounts'),
      [t('money.account'), t('money.source'), t('money.plan'), t('money.balance'), t('money.available'),
        t('money.allowance'), t('money.budget_day'), t('money.budget_month'), t('money.spent_month'), t('money.status')],
      list.map((a) => [
        h('a', { href: `#/money/${encodeURIComponent(a.id)}` }, a.id),
        sourceName(t, a.source),
        a.plan,
        money(a.balance), money(a.available),
        a.allowance ? `${money(a.allowance)} / ${(a.cycle === 'day' ? t('money.cycle_day') : t('money.cycle_month'))}` : '—',
        a.budgets && a.budgets.day ? money(a.budgets.day) : '—',
        a.budgets && a.budgets.month ? money(a.budgets.month) : '—',
        money(a.spent.month.price),
        suspendedBadge(t, a),
      ]), { id: 'money-accounts' }));
  });

  const list = await api.get('/admin/billing/prices');
  fill(prices, table(t('money.prices_caption'),
    [t('money.kind'), t('money.plan'), t('money.alias_or_model'), t('money.version'), t('money.input'),
      t('money.output'), t('money.cache_read'), t('money.request'), t('money.source'), t('money.in_force')],
    list.map((p) => [
      (p.kind === 'cost' ? t('money.kind_cost') : t('money.kind_price')), p.plan || '—', p.alias || p.model || '—',
      p.version, money(p.rates.input), money(p.rates.output), money(p.rates.cache_read), money(p.rates.request),
      sourceName(t, p.source),
      p.in_force ? h('span', { class: 'badge good' }, t('money.in_force')) : '—',
    ]), { id: 'money-prices' }));
  prices.append(h('p', { class: 'muted' }, t('money.per_million')));

  const by = h('select', { id: 'spend-by' }, SPEND_BY.map((d) => h('option', { value: d }, byName(t, d))));
  const out = h('div', {});
  fill(spend, h('div', { class: 'filters' }, field(t('money.group_by'), by)), out);
  const draw = async () => {
    const rep = await api.get(`/admin/billing/spend${api.query({ by: by.value })}`);
    if (!ctx.shown()) return;
    fill(out, spendView(ctx, rep, by.value, money));
  };
  by.addEventListener('change', () => draw().catch((e) => ctx.toast(e.message, 'error')));
  await draw();
}

// spendView is the spend report as a chart (over days, or bars per row)
// and the table of its numbers.
function spendView(ctx, rep, dim, money) {
  const { t, fmt } = ctx;
  const name = (r) => (dim === 'key' ? r.key_id : r[dim]) || '—';
  const most = Math.max(0, ...rep.rows.map((r) => fmt.micros(r.price)));
  let chart;
  if (dim === 'day') {
    const series = ['price', 'cost', 'margin'].map((k) => ({
      name: t(`money.${k}`),
      points: rep.rows.map((r) => ({ x: Date.parse(`${r.day}T00:00:00Z`), y: fmt.micros(r[k]) / 1e6 })),
    }));
    chart = h('div', {}, lineChart(series, {
      title: t('money.spend_chart'), empty: t('money.no_spend'), xLabel: (x) => fmt.day(x),
      yLabel: (y) => fmt.money(Math.round(y * 1e6), rep.currency),
    }), legend(series));
  }
  const rows = rep.rows.map((r) => [name(r), fmt.number(r.requests), fmt.number(r.tokens),
    fmt.percent(r.tokens ? r.cached_tokens / r.tokens : null), money(r.price), money(r.cost), money(r.margin),
    dim === 'day' ? null : meter(fmt.micros(r.price), most, t('money.share_of', { name: name(r) }))]);
  const headers = [byName(t, dim), t('money.requests'), t('money.tokens'), t('money.cached_share'),
    t('money.price'), t('money.cost'), t('money.margin')];
  if (dim !== 'day') headers.push(t('money.bar'));
  rows.push([t('money.total'), fmt.number(rep.total.requests), fmt.number(rep.total.tokens),
    fmt.percent(rep.total.tokens ? rep.total.cached_tokens / rep.total.tokens : null),
    money(rep.total.price), money(rep.total.cost), money(rep.total.margin), dim === 'day' ? null : '']);
  return [chart, table(t('money.spend_by', { by: byName(t, dim) }), headers,
    rows.map((r) => r.filter((c) => c !== null)), { id: 'money-spend' })];
}

async function detail(root, ctx, id, money) {
  const { t, fmt, api } = ctx;
  const path = `/admin/billing/accounts/${encodeURIComponent(id)}`;
  const facts = h('div', { id: 'money-account' });
  const statement = h('div', {});
  // The suspension controls stay put while the facts are redrawn, so a
  // reason being typed is kept.
  const reasonBox = h('input', { id: 'money-suspend-reason', type: 'text', maxlength: 500 });
  const reasonField = field(t('money.suspend_reason'), reasonBox);
  const button = h('div', { class: 'actions' });
  root.append(h('p', {}, h('a', { href: '#/money' }, t('money.back'))), h('h1', {}, t('money.account_title', { id })), facts);
  if (ctx.canWrite) root.append(h('div', { class: 'write-only money-suspend' }, reasonField, button));
  if (ctx.canWrite) root.append(h('div', { class: 'write-only money-forms' }, writeForms(ctx, path, money, () => refresh())));
  root.append(h('h2', {}, t('money.statement')), statement);

  async function refresh() {
    const [a, st] = await Promise.all([api.get(path), api.get(`${path}/statement`)]);
    if (!ctx.shown()) return;
    const items = [
      [t('money.source'), sourceName(t, a.source)],
      [t('money.plan'), a.plan],
      [t('money.balance'), h('span', { id: 'money-balance' }, money(a.balance))],
      [t('money.available'), money(a.available)],
      [t('money.overdraft'), money(a.overdraft || '0')],
      [t('money.allowance'), a.allowance ? `${money(a.allowance)} / ${(a.cycle === 'day' ? t('money.cycle_day') : t('money.cycle_month'))}` : '—'],
      [t('money.allowance_left'), a.current_cycle ? money(a.current_cycle.allowance_left) : '—'],
      [t('money.budget_day'), a.budgets && a.budgets.day ? money(a.budgets.day) : '—'],
      [t('money.budget_month'), a.budgets && a.budgets.month ? money(a.budgets.month) : '—'],
      [t('money.spent_day'), `${money(a.spent.day.price)} (${t('money.cost')} ${money(a.spent.day.cost)})`],
      [t('money.spent_month'), `${money(a.spent.month.price)} (${t('money.cost')} ${money(a.spent.month.cost)})`],
      [t('money.status'), h('span', { id: 'money-status' }, suspendedBadge(t, a),
        a.suspension ? ` ${t('money.suspension', { reason: a.suspension.reason, by: a.suspension.by, since: fmt.date(a.suspension.since) })}` : '')],
    ];
    // Redrawn only when the suspension changed, so focus on it stays.
    const state = a.suspension ? 'suspended' : 'active';
    if (button.dataset.state !== state) {
      button.dataset.state = state;
      reasonField.hidden = Boolean(a.suspension);
      fill(button, a.suspension
        ? h('button', { type: 'button', id: 'money-resume', onclick: () => resume() }, t('money.resume'))
        : h('button', { type: 'button', class: 'danger', id: 'money-suspend', onclick: () => suspend() }, t('money.suspend')));
    }
    fill(facts, h('dl', { class: 'facts' }, items.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
    fill(statement, table(t('money.statement_caption'),
      [t('money.at'), t('money.entry_kind'), t('money.amount'), t('money.request_id'), t('money.reason'), t('money.admin')],
      st.entries.slice().reverse().map((e) => [fmt.date(e.at), entryKind(t, e.kind),
        money(e.amount), h('code', {}, e.request_id), e.reason || '—', e.admin || '—']), { id: 'money-statement' }),
    h('p', {}, t('money.statement_total', { total: money(st.total), n: fmt.number(st.entries.length) }),
      st.truncated ? ` ${t('money.truncated')}` : ''));
  }

  async function suspend() {
    const reason = reasonBox.value.trim();
    if (!reason) { ctx.toast(t('money.reason_needed'), 'error'); reasonBox.focus(); return; }
    if (!await ctx.confirm(t('money.confirm_suspend', { id }))) return;
    await act(() => api.post(`${path}/suspend`, { reason }), t('money.suspended_done', { id }));
  }
  async function resume() {
    if (!await ctx.confirm(t('money.confirm_resume', { id }))) return;
    await act(() => api.post(`${path}/resume`), t('money.resumed_done', { id }));
  }
  async function act(fn, done) {
    try { await fn(); ctx.toast(done); } catch (e) { ctx.toast(e.message, 'error'); }
    await refresh();
  }
  ctx.every(5000, refresh);
}

// writeForms are the top-up, adjustment and refund forms. Each form holds
// one Idempotency-Key until its change went through, so a double click or
// a retry after a lost answer posts once; its button is also disabled while
// posting.
function writeForms(ctx, path, money, changed) {
  const { t, api } = ctx;
  const form = (kind, title, label, fields, body, question) => {
    let key = idempotencyKey();
    const submit = h('button', { type: 'submit', class: 'primary', id: `money-${kind}-submit` }, label);
    const el = h('form', { class: 'card', id: `money-${kind}` }, h('h2', {}, title), fields, h('div', { class: 'actions' }, submit));
    // Another change is another submission: it gets a key of its own.
    el.addEventListener('input', () => { key = idempotencyKey(); });
    el.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (submit.disabled) return;
      submit.disabled = true;
      try {
        if (!await ctx.confirm(question())) return;
        const r = await api.post(`${path}/${kind === 'adjustment' ? 'adjust' : kind}`, body(), { 'Idempotency-Key': key });
        key = idempotencyKey();
        el.reset();
        ctx.toast(r.applied ? t('money.posted', { balance: money(r.balance) }) : t('money.posted_before', { balance: money(r.balance) }));
        await changed();
      } catch (err) {
        ctx.toast(err.message, 'error');
      } finally {
        submit.disabled = false;
      }
    });
    return el;
  };
  const input = (id, attrs) => h('input', { id, type: 'text', required: true, ...attrs });
  const topAmount = input('money-topup-amount', { inputmode: 'decimal', pattern: '[0-9]+(\\.[0-9]{1,6})?' });
  const adjAmount = input('money-adjust-amount', { inputmode: 'decimal', pattern: '-?[0-9]+(\\.[0-9]{1,6})?' });
  const adjReason = input('money-adjust-reason');
  const refRequest = input('money-refund-request');
  const refReason = input('money-refund-reason');
  return [
    form('topup', t('money.form_topup'), t('money.do_topup'), [field(t('money.amount'), topAmount)], () => ({ amount: topAmount.value.trim() }),
      () => t('money.confirm_topup', { amount: money(topAmount.value.trim()) })),
    form('adjustment', t('money.form_adjustment'), t('money.do_adjustment'), [field(t('money.amount_signed'), adjAmount), field(t('money.reason'), adjReason)],
      () => ({ amount: adjAmount.value.trim(), reason: adjReason.value.trim() }),
      () => t('money.confirm_adjust', { amount: money(adjAmount.value.trim()) })),
    form('refund', t('money.form_refund'), t('money.do_refund'), [field(t('money.request_id'), refRequest), field(t('money.reason'), refReason)],
      () => ({ request_id: refRequest.value.trim(), reason: refReason.value.trim() }),
      () => t('money.confirm_refund', { request: refRequest.value.trim() })),
  ];
}
