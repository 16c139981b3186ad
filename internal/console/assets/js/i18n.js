// Messages and locale formatting. Every string the console shows comes from
// the message catalogs under i18n/<lang>/<area>.json: one file per area (the
// shell and each page), so a page and its words change together. A test
// (messages_test.go) fails when a key used here or in a page is missing
// from either language, or when the languages' key sets differ.

export const LANGS = ['en', 'zh'];

// AREAS are the catalog files every language has.
export const AREAS = ['shell', 'overview', 'accounts', 'keys', 'money', 'usage', 'entitlements', 'jobs', 'audit', 'catalog'];

const LOCALES = { en: 'en-US', zh: 'zh-CN' };

let lang = 'en';
let messages = {};
let timeZone = 'UTC';

// load fetches lang's catalogs; the console shows nothing before they came.
export async function load(next) {
  const parts = await Promise.all(AREAS.map(async (area) => {
    const r = await fetch(`i18n/${next}/${area}.json`, { credentials: 'same-origin' });
    if (!r.ok) throw new Error(`i18n/${next}/${area}.json: ${r.status}`);
    return r.json();
  }));
  messages = Object.assign({}, ...parts);
  lang = next;
  document.documentElement.lang = next === 'zh' ? 'zh-CN' : 'en';
}

export function language() { return lang; }
export function locale() { return LOCALES[lang]; }

export function setTimeZone(tz) { timeZone = tz; }
export function zone() { return timeZone; }

// t is the message key in the current language, with {name} replaced by
// params.name. A missing key shows as the key itself, which the catalog
// test keeps from ever shipping.
export function t(key, params) {
  let s = messages[key];
  if (s === undefined) return key;
  if (params) s = s.replace(/\{(\w+)\}/g, (m, name) => (name in params ? String(params[name]) : m));
  return s;
}

// has reports whether key is in the catalog (for codes the server may add
// later: shown as they are when unknown).
export function has(key) { return key in messages; }

// translate fills the elements under root that name a message:
// data-i18n="key" sets the text, data-i18n-attr="attr:key;attr:key" attributes.
export function translate(root) {
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll('[data-i18n-attr]')) {
    for (const pair of el.dataset.i18nAttr.split(';')) {
      const [attr, key] = pair.split(':');
      el.setAttribute(attr, t(key));
    }
  }
}

// Formatting per locale and the chosen time zone; stored values stay UTC.
export const fmt = {
  number(n, digits) {
    if (n === null || n === undefined || Number.isNaN(n)) return '—';
    return new Intl.NumberFormat(locale(), { maximumFractionDigits: digits ?? 0 }).format(n);
  },
  percent(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return '—';
    return new Intl.NumberFormat(locale(), { style: 'percent', maximumFractionDigits: digits ?? 1 }).format(x);
  },
  // money formats micro-units of currency (Sluice keeps money as integers
  // of millionths).
  money(micros, currency) {
    if (micros === null || micros === undefined) return '—';
    const v = Number(micros) / 1e6;
    if (!currency) return new Intl.NumberFormat(locale(), { maximumFractionDigits: 6 }).format(v);
    return new Intl.NumberFormat(locale(), { style: 'currency', currency, maximumFractionDigits: 6, minimumFractionDigits: 2 }).format(v);
  },
  date(ts) {
    if (!ts) return '—';
    const d = ts instanceof Date ? ts : new Date(ts);
    if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return '—';
    return new Intl.DateTimeFormat(locale(), { timeZone, dateStyle: 'medium', timeStyle: 'medium' }).format(d);
  },
  time(ts) {
    const d = ts instanceof Date ? ts : new Date(ts);
    return new Intl.DateTimeFormat(locale(), { timeZone, hour: '2-digit', minute: '2-digit' }).format(d);
  },
  day(ts) {
    const d = ts instanceof Date ? ts : new Date(ts);
    return new Intl.DateTimeFormat(locale(), { timeZone, month: 'short', day: 'numeric' }).format(d);
  },
  // duration formats milliseconds.
  duration(ms) {
    if (ms === null || ms === undefined) return '—';
    if (ms < 1000) return t('shell.unit.ms', { n: fmt.number(ms, ms < 10 ? 1 : 0) });
    if (ms < 120000) return t('shell.unit.s', { n: fmt.number(ms / 1000, 1) });
    return t('shell.unit.min', { n: fmt.number(ms / 60000, 1) });
  },
};
