// Overview: what the gateway served over a window (requests, errors by
// code, latency and queue-wait percentiles, tokens, spend; each chart has
// its numbers in a table too) and what is serving now (catalog version,
// replicas, how many keys, accounts and credentials are in each status).
// It refreshes every few seconds in place.
import { fmt } from '../i18n.js';
import { fill, h, table } from '../dom.js';
import { legend, lineChart } from '../chart.js';

const POLL_MS = 5000;
// WINDOWS: the spans offered, each with the bucket that cuts it into at
// most the summary's 500 buckets.
const WINDOWS = [
  { id: '1h', ms: 3600e3, bucket: 'minute' },
  { id: '24h', ms: 86400e3, bucket: 'hour' },
  { id: '7d', ms: 7 * 86400e3, bucket: 'day' },
  { id: '30d', ms: 30 * 86400e3, bucket: 'day' },
];

function windowText(t, id) {
  switch (id) {
    case '1h': return t('overview.window.1h');
    case '24h': return t('overview.window.24h');
    case '7d': return t('overview.window.7d');
    default: return t('overview.window.30d');
  }
}

// WIDTH is each bucket's span in milliseconds; buckets start at multiples
// of it (UTC).
const WIDTH = { minute: 60e3, hour: 3600e3, day: 86400e3 };

const sum = (o) => Object.values(o || {}).reduce((a, b) => a + b, 0);

function stat(label, value, id) {
  return h('div', { class: 'stat' }, h('div', { class: 'value', id }, value), h('div', { class: 'label' }, label));
}

function statusText(t, s) {
  switch (s) {
    case 'active': return t('overview.status.active');
    case 'pending': return t('overview.status.pending');
    case 'disabled': return t('overview.status.disabled');
    case 'expired': return t('overview.status.expired');
    case 'revoked': return t('overview.status.revoked');
    case 'draining': return t('overview.status.draining');
    case 'removed': return t('overview.status.removed');
    default: return s;
  }
}

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    const choice = h('select', { id: 'overview-window' },
      WINDOWS.map((w) => h('option', { value: w.id, selected: w.id === '24h' }, windowText(t, w.id))));
    const usage = h('div', { id: 'overview-usage' });
    const serving = h('div', { id: 'overview-serving' });
    root.append(h('h1', {}, t('overview.title')),
      h('div', { class: 'filters' }, h('div', { class: 'field' }, h('label', { for: 'overview-window' }, t('overview.window')), choice)),
      usage, h('h2', {}, t('overview.serving')), serving);

    function drawUsage(sum0) {
      const s = sum0.total;
      const errors = sum(s.errors);
      const buckets = sum0.buckets.map((b) => ({ ...b, x: Date.parse(b.start) }));
      const xLabel = sum0.bucket === 'day' ? (v) => fmt.day(v) : (v) => fmt.time(v);
      // The charts span the whole window: the intervals without a request
      // (the summary leaves them out) are drawn as zeros.
      const width = WIDTH[sum0.bucket];
      const byStart = new Map(buckets.map((b) => [b.x, b]));
      const timeline = [];
      for (let x = Math.floor(Date.parse(sum0.since) / width) * width; x < Date.parse(sum0.until); x += width) {
        timeline.push(byStart.get(x) || { x, requests: 0, errors: {}, prompt_tokens: 0, completion_tokens: 0, spend: '0', latency_p50_ms: 0, latency_p95_ms: 0, latency_p99_ms: 0 });
      }
      const series = (name, f) => ({ name, points: timeline.map((b) => ({ x: b.x, y: f(b) })) });
      const chart = (title, list, yLabel) => h('figure', { class: 'overview-chart' },
        h('figcaption', {}, title), lineChart(list, { title, xLabel, yLabel, empty: t('overview.no_requests') }), legend(list));
      const money = (m) => fmt.money(m, sum0.currency);
      // The spend axis without the currency sign, which the caption names:
      // amounts of a few micro-units are long enough.
      const spendTick = (m) => fmt.number(m / 1e6, 6);
      const q = sum0.queue_wait_this_replica_since_start;
      const codes = Object.entries(s.errors).sort((a, b) => b[1] - a[1]);
      const open = Boolean(usage.querySelector('details[open]')); // a refresh keeps the table open
      fill(usage,
        h('div', { class: 'cards' },
          stat(t('overview.requests'), fmt.number(s.requests), 'stat-requests'),
          stat(t('overview.errors'), `${fmt.number(errors)} (${fmt.percent(s.requests ? errors / s.requests : 0)})`, 'stat-errors'),
          stat(t('overview.tokens'), fmt.number(s.prompt_tokens + s.completion_tokens), 'stat-tokens'),
          stat(t('overview.spend'), money(fmt.micros(s.spend)), 'stat-spend'),
          stat(t('overview.latency'), `${fmt.duration(s.latency_p50_ms)} / ${fmt.duration(s.latency_p95_ms)} / ${fmt.duration(s.latency_p99_ms)}`, 'stat-latency'),
          stat(t('overview.ttft'), fmt.duration(s.ttft_p50_ms), 'stat-ttft'),
          stat(t('overview.queue_wait'), q ? `${fmt.duration(q.p50_ms)} / ${fmt.duration(q.p95_ms)} / ${fmt.duration(q.p99_ms)}` : '—', 'stat-queue')),
        h('p', { class: 'muted' }, t('overview.percentiles_help'), ' ',
          sum0.percentiles === 'upper_bound' ? [t('overview.percentiles_upper_bound'), ' '] : [], t('overview.queue_help')),
        h('div', { class: 'chart-grid' },
          chart(t('overview.chart.requests'), [series(t('overview.requests'), (b) => b.requests), series(t('overview.errors'), (b) => sum(b.errors))], (v) => fmt.number(v)),
          chart(t('overview.chart.latency'), [series('p50', (b) => b.latency_p50_ms), series('p95', (b) => b.latency_p95_ms), series('p99', (b) => b.latency_p99_ms)], (v) => fmt.duration(v)),
          chart(t('overview.chart.tokens'), [series(t('overview.prompt_tokens'), (b) => b.prompt_tokens), series(t('overview.completion_tokens'), (b) => b.completion_tokens)], (v) => fmt.number(v)),
          chart(t('overview.chart.spend', { currency: sum0.currency }), [series(t('overview.spend'), (b) => fmt.micros(b.spend))], spendTick)),
        codes.length ? table(t('overview.errors_by_code'), [t('overview.code'), t('overview.count')], codes.map(([c, n]) => [c, fmt.number(n)]), { id: 'overview-errors' }) : null,
        h('details', { open }, h('summary', {}, t('overview.buckets_show')),
          table(t('overview.buckets'), [t('overview.bucket_start'), t('overview.requests'), t('overview.errors'), t('overview.prompt_tokens'),
            t('overview.completion_tokens'), t('overview.spend'), 'p50', 'p95', 'p99'],
          buckets.map((b) => [sum0.bucket === 'day' ? fmt.day(b.x) : fmt.date(b.x), fmt.number(b.requests), fmt.number(sum(b.errors)), fmt.number(b.prompt_tokens),
            fmt.number(b.completion_tokens), money(fmt.micros(b.spend)), fmt.duration(b.latency_p50_ms), fmt.duration(b.latency_p95_ms), fmt.duration(b.latency_p99_ms)]),
          { id: 'overview-buckets' })));
    }

    function counts(title, byStatus) {
      const entries = Object.entries(byStatus || {});
      return h('div', { class: 'stat' }, h('div', { class: 'value' }, fmt.number(sum(byStatus))), h('div', { class: 'label' }, title),
        entries.length ? h('ul', { class: 'plain' }, entries.map(([s, n]) => h('li', {}, `${statusText(t, s)}: ${fmt.number(n)}`))) : null);
    }

    function drawStatus(st) {
      fill(serving,
        h('dl', { class: 'facts' },
          h('dt', {}, t('overview.catalog_version')), h('dd', { id: 'catalog-version' }, String(st.stored_version || st.version)),
          h('dt', {}, t('overview.catalog_source')), h('dd', {}, st.source || '—'),
          h('dt', {}, t('overview.loaded_at')), h('dd', {}, fmt.date(st.loaded_at)),
          h('dt', {}, t('overview.aliases')), h('dd', {}, (st.aliases || []).join(', ') || '—'),
          st.last_error ? [h('dt', {}, t('overview.last_error')), h('dd', { class: 'error' }, `${st.last_error} (${fmt.date(st.last_error_at)})`)] : null),
        h('div', { class: 'cards', id: 'overview-counts' },
          counts(t('overview.keys'), st.keys), counts(t('overview.accounts'), st.accounts), counts(t('overview.credentials'), st.credentials)),
        table(t('overview.replicas'), [t('overview.replica'), t('overview.replica_version'), t('overview.replica_since'), t('overview.replica_seen')],
          (st.replicas || []).map((r) => [r.id, r.version ? String(r.version) : (r.source || '—'), fmt.date(r.since), fmt.date(r.seen_at)])));
    }

    async function poll() {
      const w = WINDOWS.find((x) => x.id === choice.value);
      const now = Date.now();
      const [st, summary] = await Promise.all([
        api.get('/admin/status'),
        api.get(`/admin/usage/summary${api.query({ since: new Date(now - w.ms).toISOString(), bucket: w.bucket })}`).catch((e) => e),
      ]);
      if (!ctx.shown()) return;
      if (summary instanceof Error) fill(usage, h('p', { class: 'muted' }, t('overview.no_usage', { message: summary.message })));
      else drawUsage(summary);
      drawStatus(st);
    }
    choice.addEventListener('change', () => poll().catch((e) => ctx.toast(e.message, 'error')));
    ctx.every(POLL_MS, poll);
  },
};
