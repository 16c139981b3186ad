// Accounts: each upstream account as it is now, polled every second and
// updated in place (focus and scroll stay where they were): its state with
// a cooldown counting down, in flight against its cap, its queue by class,
// its per-model units and its credentials; and the operator's actions on
// both, each confirmed first. The upstream picture (what its executions
// did over 15 minutes and a day) loads when its section is opened.
import { fill, h, table } from '../dom.js';
import { meter } from '../chart.js';

const POLL_MS = 1000;
const PICTURE_MS = 10000;
const CLASSES = ['interactive', 'standard', 'background'];

// accountState names what an account is doing now: a disabled account by
// why (a suspension, a billing or auth failure the upstream reported, or an
// operator), an active one by its cooldown and probe.
function accountState(a, now) {
  if (a.status === 'disabled') {
    const why = a.reason || '';
    if (why.startsWith('suspended')) return 'suspended';
    if (why.startsWith('billing')) return 'billing';
    if (why.startsWith('auth')) return 'auth';
    return 'disabled';
  }
  if (a.probe === 'in_flight') return 'probing';
  if (a.cooling_until && Date.parse(a.cooling_until) > now) return 'cooling';
  return 'ready';
}

function stateText(t, s) {
  switch (s) {
    case 'ready': return t('accounts.state.ready');
    case 'cooling': return t('accounts.state.cooling');
    case 'probing': return t('accounts.state.probing');
    case 'suspended': return t('accounts.state.suspended');
    case 'billing': return t('accounts.state.billing');
    case 'auth': return t('accounts.state.auth');
    default: return t('accounts.state.disabled');
  }
}

const BADGE = { ready: 'good', cooling: 'warn', probing: 'warn' };

function credentialText(t, status) {
  switch (status) {
    case 'active': return t('accounts.cred.active');
    case 'draining': return t('accounts.cred.draining');
    case 'disabled': return t('accounts.cred.disabled');
    case 'removed': return t('accounts.cred.removed');
    default: return status;
  }
}

function probeText(t, probe) {
  switch (probe) {
    case 'available': return t('accounts.probe.available');
    case 'in_flight': return t('accounts.probe.in_flight');
    default: return t('accounts.probe.none');
  }
}

// remaining is how long until ts, or '' when it has passed.
function remaining(fmt, ts, now) {
  const left = ts ? Date.parse(ts) - now : 0;
  return left > 0 ? fmt.duration(Math.ceil(left / 1000) * 1000) : '';
}

// badge sets el to show a state in its colour.
function badge(el, text, kind) {
  el.textContent = text;
  el.className = `badge state ${kind || 'bad'}`;
}

export default {
  async render(root, ctx) {
    const { t, fmt, api } = ctx;
    const list = h('div', { class: 'accounts' });
    const status = h('p', { class: 'muted', id: 'accounts-updated' });
    const empty = h('p', { class: 'muted', hidden: true }, t('accounts.none'));
    root.append(h('h1', {}, t('accounts.title')), status, empty, list);
    const cards = new Map();

    // act asks question, then posts path (with body) and refreshes.
    async function act(question, path, body) {
      if (!(await ctx.confirm(question))) return;
      try {
        await api.post(path, body);
        ctx.toast(t('accounts.done'));
        await poll();
      } catch (e) {
        ctx.toast(e.message, 'error');
      }
    }

    function credentialRow(id) {
      const cells = { status: h('span'), reason: h('td'), inflight: h('td', { class: 'num' }), cooling: h('td'), endpoints: h('td') };
      const name = (key) => `${t(key)} ${id}`;
      const buttons = {
        drain: h('button', { type: 'button', class: 'write-only', 'aria-label': name('accounts.drain'),
          onclick: () => act(t('accounts.confirm.drain', { id }), `/admin/credentials/${id}/drain`) }, t('accounts.drain')),
        disable: h('button', { type: 'button', class: 'write-only danger', 'aria-label': name('accounts.disable'),
          onclick: () => act(t('accounts.confirm.cred_disable', { id }), `/admin/credentials/${id}/disable`) }, t('accounts.disable')),
        enable: h('button', { type: 'button', class: 'write-only', 'aria-label': name('accounts.enable'),
          onclick: () => act(t('accounts.confirm.cred_enable', { id }), `/admin/credentials/${id}/enable`) }, t('accounts.enable')),
      };
      const tr = h('tr', { 'data-credential': id },
        h('th', { scope: 'row' }, id), h('td', {}, cells.status), cells.reason, cells.inflight, cells.cooling, cells.endpoints,
        ctx.canWrite ? h('td', {}, h('div', { class: 'actions' }, buttons.drain, buttons.disable, buttons.enable)) : null);
      return {
        tr,
        update(c, now) {
          badge(cells.status, credentialText(t, c.status), c.status === 'active' ? 'good' : c.status === 'draining' ? 'warn' : 'bad');
          cells.reason.textContent = c.reason || '—';
          cells.inflight.textContent = fmt.number(c.in_flight);
          cells.cooling.textContent = remaining(fmt, c.cooling_until, now) || '—';
          cells.endpoints.textContent = (c.endpoints || []).join(', ');
          buttons.drain.disabled = c.status !== 'active';
          buttons.disable.disabled = c.status === 'disabled' || c.status === 'removed';
          buttons.enable.disabled = c.status === 'active' || c.status === 'removed';
        },
      };
    }

    function pictureView(a) {
      const p = a.picture;
      if (!p) return h('p', { class: 'muted' }, t('accounts.picture.none'));
      if (p.error) return h('p', { class: 'error' }, t('accounts.picture.error'));
      const rows = [];
      for (const w of p.windows) {
        const counts = (c) => [fmt.number(c.executions), fmt.number(c.ok), fmt.number(c.rate_limited),
          fmt.number(Object.values(c.failed || {}).reduce((x, y) => x + y, 0)), fmt.duration(c.mean_ok_duration_ms || null)];
        rows.push([w.window, t('accounts.picture.account'), limitedText(w.limited), ...counts(w.account)]);
        for (const c of w.credentials) rows.push([w.window, c.id, '', ...counts(c)]);
      }
      return table(t('accounts.picture.caption', { id: a.id }),
        [t('accounts.picture.window'), t('accounts.picture.subject'), t('accounts.picture.limited'), t('accounts.picture.executions'),
          t('accounts.picture.ok'), t('accounts.picture.rate_limited'), t('accounts.picture.failed'), t('accounts.picture.mean_ok')], rows);
    }

    function limitedText(v) {
      switch (v) {
        case 'credential': return t('accounts.limited.credential');
        case 'account': return t('accounts.limited.account');
        case '': return t('accounts.limited.none');
        default: return v;
      }
    }

    function accountCard(id) {
      const state = h('span', { class: 'badge state' });
      const countdown = h('span', { class: 'countdown' });
      const gauge = h('span', { class: 'gauge' });
      const facts = h('dl', { class: 'facts' });
      const models = h('div');
      const credBody = h('tbody');
      const credRows = new Map();
      const picture = h('div', { class: 'picture' });
      const reason = h('input', { type: 'text', maxlength: 500 });
      const suspendField = h('div', { class: 'field write-only' }, h('label', { for: `suspend-${id}` }, t('accounts.suspend_reason')), reason);
      reason.id = `suspend-${id}`;
      const acctButton = (key, question, action, cls) => h('button', { type: 'button', class: `write-only ${cls || ''}`,
        'aria-label': `${t(key)} ${id}`, onclick: () => act(question(), `/admin/accounts/${id}/${action}`) }, t(key));
      const buttons = {
        disable: acctButton('accounts.disable', () => t('accounts.confirm.disable', { id }), 'disable', 'danger'),
        enable: acctButton('accounts.enable', () => t('accounts.confirm.enable', { id }), 'enable'),
        resume: acctButton('accounts.resume', () => t('accounts.confirm.resume', { id }), 'resume'),
        suspend: h('button', { type: 'button', class: 'write-only danger', 'aria-label': `${t('accounts.suspend')} ${id}`,
          onclick: () => {
            if (!reason.value.trim()) { ctx.toast(t('accounts.suspend_needs_reason'), 'error'); reason.focus(); return; }
            act(t('accounts.confirm.suspend', { id }), `/admin/accounts/${id}/suspend`, { reason: reason.value.trim() });
          } }, t('accounts.suspend')),
      };
      let pictureTimer = 0;
      const details = h('details', {
        ontoggle: () => {
          clearInterval(pictureTimer);
          if (!details.open) return;
          const load = async () => {
            if (!ctx.shown() || !details.open) { clearInterval(pictureTimer); return; }
            try { fill(picture, pictureView(await api.get(`/admin/accounts/${id}`))); } catch (e) { fill(picture, h('p', { class: 'error' }, e.message)); }
          };
          load();
          pictureTimer = setInterval(load, PICTURE_MS);
        },
      }, h('summary', {}, t('accounts.picture.title')), picture);
      const el = h('section', { class: 'card account', 'data-account': id, 'aria-labelledby': `acct-${id}` },
        h('h2', { id: `acct-${id}` }, id), h('p', { class: 'statusline' }, state, ' ', countdown, ' ', gauge),
        facts,
        ctx.canWrite ? h('div', { class: 'actions write-only' }, buttons.disable, buttons.enable, suspendField, buttons.suspend, buttons.resume) : null,
        models,
        h('table', {}, h('caption', {}, t('accounts.credentials', { id })),
          h('thead', {}, h('tr', {}, [t('accounts.cred.id'), t('accounts.cred.status'), t('accounts.cred.reason'), t('accounts.in_flight'),
            t('accounts.cooldown'), t('accounts.cred.endpoints'), ctx.canWrite ? t('accounts.actions') : null]
            .filter((x) => x !== null).map((x) => h('th', { scope: 'col' }, x)))),
          credBody),
        details);
      return {
        el,
        update(a, creds, now) {
          const s = accountState(a, now);
          badge(state, stateText(t, s), BADGE[s]);
          countdown.textContent = s === 'cooling' ? t('accounts.cooling_left', { left: remaining(fmt, a.cooling_until, now) }) : '';
          const capText = a.cap ? fmt.number(a.cap) : t('accounts.unlimited');
          fill(gauge, meter(a.in_flight, a.cap || a.in_flight, t('accounts.in_flight_of', { n: fmt.number(a.in_flight), cap: capText })),
            ' ', t('accounts.in_flight_of', { n: fmt.number(a.in_flight), cap: capText }));
          const queue = CLASSES.map((c) => `${classText(c)} ${fmt.number((a.waiting_by_class || {})[c] || 0)}`).join(' · ');
          fill(facts,
            h('dt', {}, t('accounts.waiting')), h('dd', { class: 'waiting' }, `${fmt.number(a.waiting)} (${queue})`),
            h('dt', {}, t('accounts.quota_scope')), h('dd', {}, a.quota_scope || '—'),
            h('dt', {}, t('accounts.backoff')), h('dd', {}, fmt.number(a.backoff_level)),
            h('dt', {}, t('accounts.probe')), h('dd', {}, probeText(t, a.probe)),
            h('dt', {}, t('accounts.cooled')), h('dd', {}, fmt.duration(a.cooled_seconds * 1000)),
            h('dt', {}, t('accounts.reason')), h('dd', { class: 'reason' }, a.reason || '—'),
            h('dt', {}, t('accounts.since')), h('dd', {}, fmt.date(a.since)));
          fill(models, a.models && a.models.length ? table(t('accounts.models', { id }),
            [t('accounts.model'), t('accounts.in_flight'), t('accounts.cooldown'), t('accounts.backoff'), t('accounts.probe')],
            a.models.map((m) => [m.model, t('accounts.in_flight_of', { n: fmt.number(m.in_flight), cap: m.cap ? fmt.number(m.cap) : t('accounts.unlimited') }),
              remaining(fmt, m.cooling_until, now) || '—', fmt.number(m.backoff_level), probeText(t, m.probe)])) : null);
          const suspended = s === 'suspended';
          buttons.disable.disabled = a.status === 'disabled';
          buttons.enable.disabled = a.status !== 'disabled' || suspended;
          buttons.suspend.disabled = suspended;
          buttons.resume.disabled = !suspended;
          const seen = new Set();
          for (const c of creds) {
            seen.add(c.id);
            let row = credRows.get(c.id);
            if (!row) { row = credentialRow(c.id); credRows.set(c.id, row); credBody.append(row.tr); }
            row.update(c, now);
          }
          for (const [cid, row] of credRows) if (!seen.has(cid)) { row.tr.remove(); credRows.delete(cid); }
        },
      };
    }

    function classText(c) {
      switch (c) {
        case 'interactive': return t('accounts.class.interactive');
        case 'standard': return t('accounts.class.standard');
        default: return t('accounts.class.background');
      }
    }

    async function poll() {
      const [accounts, credentials] = await Promise.all([api.get('/admin/accounts'), api.get('/admin/credentials')]);
      if (!ctx.shown()) return;
      const now = Date.now();
      const seen = new Set();
      for (const a of accounts) {
        seen.add(a.id);
        let card = cards.get(a.id);
        if (!card) { card = accountCard(a.id); cards.set(a.id, card); list.append(card.el); }
        card.update(a, credentials.filter((c) => c.account === a.id), now);
      }
      for (const [id, card] of cards) if (!seen.has(id)) { card.el.remove(); cards.delete(id); }
      empty.hidden = accounts.length > 0;
      status.textContent = t('accounts.updated', { time: fmt.date(now) });
    }

    ctx.every(POLL_MS, poll);
  },
};
