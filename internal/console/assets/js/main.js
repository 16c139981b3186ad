// The console's shell: sign-in, navigation, language and time zone, and the
// router that shows one page at a time. Pages are modules under pages/
// exporting default { render(root, ctx) }; see ctx below for what they get.

import * as api from './api.js';
import { fmt, language, load, setTimeZone, t, translate, zone } from './i18n.js';
import { fill, h } from './dom.js';

// PAGES in navigation order; each id is a module pages/<id>.js and an area
// of the message catalog whose "<id>.title" names it.
const PAGES = ['overview', 'accounts', 'keys', 'money', 'usage', 'entitlements', 'jobs', 'audit', 'catalog'];

const $ = (id) => document.getElementById(id);
let session = null; // {token_id, role, csrf, expires_at} while signed in
let current = null; // the page showing: {id, timers, disposed}

const ZONES = ['UTC', 'Asia/Shanghai', 'Asia/Singapore', 'Asia/Tokyo', 'Europe/London', 'Europe/Berlin',
  'America/New_York', 'America/Los_Angeles'];

function pref(name, fallback) {
  try { return localStorage.getItem(`sluice.${name}`) || fallback; } catch { return fallback; }
}
function remember(name, value) {
  try { localStorage.setItem(`sluice.${name}`, value); } catch { /* private mode: not remembered */ }
}

function toast(message, kind) {
  const el = $('toast');
  el.textContent = message;
  el.className = `toast show ${kind || ''}`;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.className = 'toast'; }, 5000);
}

// confirmAction asks a yes/no question in a modal dialog; resolves true on yes.
function confirmAction(question) {
  return new Promise((resolve) => {
    const dlg = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-q' },
      h('p', { id: 'confirm-q' }, question),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'primary', onclick: () => { dlg.close(); resolve(true); } }, t('shell.confirm.yes')),
        h('button', { type: 'button', onclick: () => { dlg.close(); resolve(false); } }, t('shell.confirm.no'))));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(false); });
    document.body.append(dlg);
    dlg.showModal();
  });
}

function renderNav() {
  const here = route();
  fill($('nav'), h('ul', {}, PAGES.map((id) => h('li', {},
    h('a', { href: `#/${id}`, 'aria-current': id === here ? 'page' : false }, t(`${id}.title`))))));
  $('who').textContent = session ? t('shell.who', { id: session.token_id, role: t(`shell.role.${session.role}`) }) : '';
}

function route() {
  const id = location.hash.replace(/^#\/?/, '').split('/')[0];
  return PAGES.includes(id) ? id : 'overview';
}

function dispose() {
  if (!current) return;
  current.disposed = true;
  current.timers.forEach(clearInterval);
  current = null;
}

async function show() {
  dispose();
  renderNav();
  const id = route();
  const page = { id, timers: [], disposed: false };
  current = page;
  // Each showing draws into an element of its own: an answer that reaches
  // a page after the user left draws into a detached element, never
  // beside the next page.
  const root = h('div', {}, h('p', { class: 'loading' }, t('shell.loading')));
  fill($('page'), root);
  const ctx = {
    api,
    t,
    fmt,
    canWrite: session.role === 'write',
    session,
    toast,
    confirm: confirmAction,
    // every runs fn now and each ms while this page shows; a failure is
    // shown once and polling goes on.
    every(ms, fn) {
      const tick = () => { if (!page.disposed) fn().catch((e) => toast(e.message, 'error')); };
      tick();
      page.timers.push(setInterval(tick, ms));
    },
    // shown reports whether this page is still the one showing (an answer
    // arriving after navigation must not draw).
    shown: () => !page.disposed,
    rerender: show,
  };
  try {
    const mod = await import(`./pages/${id}.js`);
    if (page.disposed) return;
    fill(root);
    await mod.default.render(root, ctx);
  } catch (e) {
    if (!page.disposed) fill(root, h('p', { class: 'error', role: 'alert' }, t('shell.error', { message: e.message })));
  }
  document.title = `${t(`${id}.title`)} · Sluice`;
}

function signedIn(s) {
  session = s;
  api.setCSRF(s.csrf);
  document.body.classList.toggle('readonly', s.role !== 'write');
  $('signin').hidden = true;
  $('bar').classList.remove('out');
  show();
}

function signedOut() {
  dispose();
  session = null;
  api.setCSRF('');
  $('bar').classList.add('out');
  fill($('page'));
  $('signin').hidden = false;
  $('token').value = '';
  $('token').focus();
}

async function switchLanguage(next) {
  await load(next);
  $('toast').className = 'toast'; // a message in the other language goes
  remember('lang', next);
  translate(document);
  if (session) show();
}

async function start() {
  const lang = pref('lang', navigator.language && navigator.language.startsWith('zh') ? 'zh' : 'en');
  await load(lang);
  translate(document);
  $('lang').value = language();
  const here = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const zones = ZONES.includes(here) ? ZONES : [here, ...ZONES];
  fill($('tz'), zones.map((z) => h('option', { value: z }, z)));
  setTimeZone(pref('tz', here));
  $('tz').value = zone();

  $('lang').addEventListener('change', (e) => switchLanguage(e.target.value));
  $('tz').addEventListener('change', (e) => { setTimeZone(e.target.value); remember('tz', e.target.value); show(); });
  $('signout').addEventListener('click', async () => {
    try { await api.del('/console/session'); } finally { signedOut(); }
  });
  $('signin').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('signin-error').textContent = '';
    try {
      signedIn(await api.post('/console/session', { token: $('token').value }));
    } catch (err) {
      $('signin-error').textContent = err.status === 401 ? t('shell.signin.wrong') : t('shell.error', { message: err.message });
    }
  });
  window.addEventListener('hashchange', () => { if (session) show(); });
  api.whenSignedOut(signedOut);

  try {
    signedIn(await api.get('/console/session'));
  } catch {
    signedOut();
  }
}

start();
