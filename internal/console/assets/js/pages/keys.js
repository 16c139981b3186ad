// Keys: the list (filtered by a label selector, which the server
// evaluates as a batch would), a key's page with its edit form and life
// cycle actions, the create form, and batch changes previewed by a dry run
// before they can be applied. Routes: #/keys, #/keys/new, #/keys/batch,
// #/keys/<id>. A new or rotated key's secret is shown once, here only.
import { field, fill, h, table } from '../dom.js';

// The API paths a key may be limited to (sluice.KeyPathNames).
const PATHS = ['chat', 'embeddings', 'fal', 'gemini', 'gemini_embeddings', 'messages', 'responses', 'responses_compact', 'videos'];
const MODES = ['default', 'strict', 'preferred', 'pool'];
const LIMITS = ['rpm', 'tpm', 'max_inflight', 'daily_tokens'];

// list splits "a, b" into ['a', 'b'].
const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);

// labelsOf reads "team=web, env=prod"; labelsText writes it.
function labelsOf(s) {
  const out = {};
  for (const pair of list(s)) {
    const i = pair.indexOf('=');
    if (i > 0) out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
    else out[pair] = '';
  }
  return out;
}
const labelsText = (labels) => Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');

function statusText(t, s) {
  switch (s) {
    case 'active': return t('keys.status.active');
    case 'pending': return t('keys.status.pending');
    case 'disabled': return t('keys.status.disabled');
    case 'expired': return t('keys.status.expired');
    case 'revoked': return t('keys.status.revoked');
    default: return s;
  }
}

function modeText(t, m) {
  switch (m) {
    case 'strict': return t('keys.mode.strict');
    case 'preferred': return t('keys.mode.preferred');
    case 'pool': return t('keys.mode.pool');
    default: return t('keys.mode.default');
  }
}

function limitText(t, name) {
  switch (name) {
    case 'rpm': return t('keys.limit.rpm');
    case 'tpm': return t('keys.limit.tpm');
    case 'max_inflight': return t('keys.limit.max_inflight');
    default: return t('keys.limit.daily_tokens');
  }
}

function operationText(t, op) {
  switch (op) {
    case 'disable': return t('keys.op.disable');
    case 'enable': return t('keys.op.enable');
    case 'set_policy': return t('keys.op.set_policy');
    case 'set_limits': return t('keys.op.set_limits');
    default: return t('keys.op.set_billing_account');
  }
}

// limitsSummary is a key's limits in a line ("—" without any).
function limitsSummary(t, fmt, limits) {
  const parts = LIMITS.filter((n) => limits && limits[n]).map((n) => `${limitText(t, n)} ${fmt.number(limits[n])}`);
  return parts.length ? parts.join(' · ') : '—';
}

function policySummary(t, p) {
  if (!p || !p.mode) return modeText(t, 'default');
  const where = [...(p.accounts || []), p.pool].filter(Boolean).join(', ');
  return where ? `${modeText(t, p.mode)}: ${where}` : modeText(t, p.mode);
}

function badgeClass(status) {
  if (status === 'active') return 'badge good';
  if (status === 'pending' || status === 'disabled') return 'badge warn';
  return 'badge bad';
}

// policyFields are the inputs of a route policy, filled from p; value()
// is the policy they say (only the fields set).
function policyFields(t, p) {
  p = p || {};
  const mode = h('select', {}, MODES.map((m) => h('option', { value: m, selected: (p.mode || 'default') === m }, modeText(t, m))));
  const accounts = h('input', { type: 'text', value: (p.accounts || []).join(', '), placeholder: 'org-1, org-2' });
  const pool = h('input', { type: 'text', value: p.pool || '' });
  const fallback = h('input', { type: 'text', value: p.fallback || '', placeholder: 'any' });
  const wait = h('input', { type: 'text', value: p.wait || '', placeholder: '30s' });
  return {
    el: h('fieldset', { class: 'group' }, h('legend', {}, t('keys.policy')),
      field(t('keys.policy.mode'), mode), field(t('keys.policy.accounts'), accounts), field(t('keys.policy.pool'), pool),
      field(t('keys.policy.fallback'), fallback), field(t('keys.policy.wait'), wait)),
    value() {
      const out = {};
      if (mode.value !== 'default') out.mode = mode.value;
      if (list(accounts.value).length) out.accounts = list(accounts.value);
      if (pool.value.trim()) out.pool = pool.value.trim();
      if (fallback.value.trim()) out.fallback = fallback.value.trim();
      if (wait.value.trim()) out.wait = wait.value.trim();
      return out;
    },
  };
}

// limitsFields are the inputs of a key's limits; value() holds the ones set.
function limitsFields(t, limits, legend) {
  const inputs = Object.fromEntries(LIMITS.map((n) => [n, h('input', { type: 'number', min: 0, step: 1, value: (limits && limits[n]) || '', 'data-limit': n })]));
  return {
    el: h('fieldset', { class: 'group' }, h('legend', {}, legend), LIMITS.map((n) => field(limitText(t, n), inputs[n]))),
    value() {
      const out = {};
      for (const n of LIMITS) if (Number(inputs[n].value) > 0) out[n] = Number(inputs[n].value);
      return out;
    },
  };
}

// pathsFields are a checkbox per API path; none checked means every path.
function pathsFields(t, paths) {
  const boxes = PATHS.map((p) => h('input', { type: 'checkbox', value: p, checked: (paths || []).includes(p), id: `path-${p}` }));
  return {
    el: h('fieldset', { class: 'group paths' }, h('legend', {}, t('keys.paths')), h('p', { class: 'muted' }, t('keys.paths_help')),
      boxes.map((b) => h('label', { class: 'check' }, b, ' ', b.value))),
    value: () => boxes.filter((b) => b.checked).map((b) => b.value),
  };
}

// secretBox shows a key's secret once, with a copy button and the warning.
function secretBox(t, ctx, secret) {
  const code = h('code', { id: 'new-secret' }, secret);
  return h('div', { class: 'card secret-card', role: 'alert' },
    h('p', {}, h('strong', {}, t('keys.secret_once'))),
    h('p', { class: 'secret' }, code),
    h('button', { type: 'button', class: 'primary', onclick: async () => {
      try { await navigator.clipboard.writeText(secret); ctx.toast(t('keys.copied')); } catch { ctx.toast(t('keys.copy_failed'), 'error'); }
    } }, t('keys.copy')));
}

function errorLine() { return h('p', { class: 'error', role: 'alert' }); }

async function renderList(root, ctx) {
  const { t, fmt, api } = ctx;
  const selector = h('input', { type: 'text', id: 'key-selector', placeholder: 'team=web,env!=prod', value: sessionStorage.getItem('sluice.keys.selector') || '' });
  const err = errorLine();
  const out = h('div', { id: 'keys-list' });
  async function load() {
    const sel = selector.value.trim();
    try { sessionStorage.setItem('sluice.keys.selector', sel); } catch { /* not kept */ }
    err.textContent = '';
    let keys;
    try {
      keys = await api.get(`/admin/keys${api.query({ selector: sel })}`);
    } catch (e) {
      err.textContent = e.message;
      return;
    }
    if (!ctx.shown()) return;
    fill(out, table(t('keys.caption', { n: fmt.number(keys.length) }),
      [t('keys.id'), t('keys.name'), t('keys.tenant'), t('keys.status'), t('keys.models'), t('keys.labels'), t('keys.limits'),
        t('keys.policy'), t('keys.billing_account')],
      keys.map((k) => [h('a', { href: `#/keys/${encodeURIComponent(k.id)}` }, k.id), k.name, k.tenant,
        h('span', { class: badgeClass(k.status) }, statusText(t, k.status)),
        k.models.length ? k.models.join(', ') : t('keys.all_models'), labelsText(k.labels) || '—',
        limitsSummary(t, fmt, k.limits), policySummary(t, k.policy), k.billing_account || '—'])));
  }
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); load(); } },
    field(t('keys.selector'), selector), h('button', { type: 'submit' }, t('keys.filter')));
  root.append(h('h1', {}, t('keys.title')),
    ctx.canWrite ? h('div', { class: 'actions write-only' },
      h('a', { class: 'button primary', href: '#/keys/new', id: 'new-key' }, t('keys.new')),
      h('a', { class: 'button', href: '#/keys/batch', id: 'batch-keys' }, t('keys.batch'))) : null,
    form, err, out);
  await load();
}

async function renderCreate(root, ctx) {
  const { t, api } = ctx;
  const id = h('input', { type: 'text', id: 'key-id', autocomplete: 'off' });
  const name = h('input', { type: 'text', id: 'key-name', required: true });
  const tenant = h('input', { type: 'text', id: 'key-tenant', required: true });
  const models = h('input', { type: 'text', id: 'key-models', placeholder: 'fast, smart' });
  const labels = h('input', { type: 'text', id: 'key-labels', placeholder: 'team=web, env=prod' });
  const billing = h('input', { type: 'text', id: 'key-billing' });
  const policy = policyFields(t);
  const limits = limitsFields(t, {}, t('keys.limits'));
  const paths = pathsFields(t, []);
  const err = errorLine();
  const result = h('div');
  const form = h('form', { class: 'card key-form', onsubmit: async (e) => {
    e.preventDefault();
    err.textContent = '';
    const spec = { name: name.value.trim(), tenant: tenant.value.trim(), models: list(models.value), labels: labelsOf(labels.value),
      policy: policy.value(), limits: limits.value(), paths: paths.value() };
    if (id.value.trim()) spec.id = id.value.trim();
    if (billing.value.trim()) spec.billing_account = billing.value.trim();
    try {
      const issued = await api.post('/admin/keys', spec);
      fill(result, secretBox(t, ctx, issued.key),
        h('p', {}, h('a', { href: `#/keys/${encodeURIComponent(issued.record.id)}` }, t('keys.open', { id: issued.record.id }))));
      form.hidden = true;
    } catch (e2) {
      err.textContent = e2.message;
    }
  } },
  field(t('keys.id_optional'), id), field(t('keys.name'), name), field(t('keys.tenant'), tenant),
  field(t('keys.models_help'), models), field(t('keys.labels_help'), labels), field(t('keys.billing_account'), billing),
  policy.el, limits.el, paths.el, err,
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, t('keys.create')), h('a', { href: '#/keys' }, t('keys.back'))));
  root.append(h('h1', {}, t('keys.new')), form, result);
}

async function renderKey(root, ctx, id) {
  const { t, fmt, api } = ctx;
  const k = await api.get(`/admin/keys/${encodeURIComponent(id)}`);
  if (!ctx.shown()) return;
  const result = h('div');
  // act confirms, posts the life cycle action and shows the key anew (a
  // rotation's secret first).
  async function act(action, question) {
    if (!(await ctx.confirm(question))) return;
    try {
      const answer = await api.post(`/admin/keys/${encodeURIComponent(id)}/${action}`);
      if (action === 'rotate') {
        fill(root);
        await renderKey(root, ctx, id);
        root.prepend(secretBox(t, ctx, answer.key));
        return;
      }
      ctx.toast(t('keys.done'));
      ctx.rerender();
    } catch (e) {
      ctx.toast(e.message, 'error');
    }
  }
  const facts = h('dl', { class: 'facts', id: 'key-facts' },
    h('dt', {}, t('keys.name')), h('dd', {}, k.name),
    h('dt', {}, t('keys.tenant')), h('dd', {}, k.tenant),
    h('dt', {}, t('keys.status')), h('dd', {}, h('span', { class: badgeClass(k.status), id: 'key-status' }, statusText(t, k.status))),
    h('dt', {}, t('keys.prefix')), h('dd', {}, h('code', {}, k.prefix)),
    h('dt', {}, t('keys.models')), h('dd', {}, k.models.length ? k.models.join(', ') : t('keys.all_models')),
    h('dt', {}, t('keys.labels')), h('dd', {}, labelsText(k.labels) || '—'),
    h('dt', {}, t('keys.limits')), h('dd', {}, limitsSummary(t, fmt, k.limits)),
    h('dt', {}, t('keys.policy')), h('dd', {}, policySummary(t, k.policy)),
    h('dt', {}, t('keys.paths')), h('dd', {}, (k.paths || []).join(', ') || t('keys.all_paths')),
    h('dt', {}, t('keys.billing_account')), h('dd', {}, k.billing_account || '—'),
    h('dt', {}, t('keys.expires')), h('dd', {}, k.expires_at ? fmt.date(k.expires_at) : t('keys.never')),
    h('dt', {}, t('keys.created')), h('dd', {}, fmt.date(k.created_at)),
    h('dt', {}, t('keys.source')), h('dd', {}, k.static ? t('keys.source_catalog') : t('keys.source_api')));
  root.append(h('p', {}, h('a', { href: '#/keys' }, t('keys.back'))), h('h1', {}, t('keys.key', { id: k.id })), facts, result);
  if (k.static) {
    root.append(h('p', { class: 'muted' }, t('keys.static_help')));
    return;
  }
  if (!ctx.canWrite) return;
  const button = (action, label, question, cls) => h('button', { type: 'button', class: cls || '', 'data-action': action,
    disabled: k.status === 'revoked', onclick: () => act(action, question) }, label);
  root.append(h('div', { class: 'actions write-only' },
    button('rotate', t('keys.rotate'), t('keys.confirm.rotate', { id })),
    k.status === 'active' ? button('disable', t('keys.disable'), t('keys.confirm.disable', { id })) : null,
    k.status === 'disabled' || k.status === 'pending' ? button('enable', t('keys.enable'), t('keys.confirm.enable', { id })) : null,
    button('revoke', t('keys.revoke'), t('keys.confirm.revoke', { id }), 'danger')));
  if (k.status === 'revoked') return;

  const models = h('input', { type: 'text', id: 'edit-models', value: k.models.join(', ') });
  const labels = h('input', { type: 'text', id: 'edit-labels', value: labelsText(k.labels) });
  const policy = policyFields(t, k.policy);
  const limits = limitsFields(t, k.limits, t('keys.limits'));
  const paths = pathsFields(t, k.paths);
  const err = errorLine();
  root.append(h('form', { class: 'card key-form write-only', id: 'edit-key', onsubmit: async (e) => {
    e.preventDefault();
    err.textContent = '';
    // One PATCH: the key changes at once, and the audit log has one entry.
    const change = { models: list(models.value), labels: labelsOf(labels.value), policy: policy.value(), limits: limits.value(), paths: paths.value() };
    try {
      await api.patch(`/admin/keys/${encodeURIComponent(id)}`, change);
      ctx.toast(t('keys.saved'));
      ctx.rerender();
    } catch (e2) {
      err.textContent = e2.message;
    }
  } }, h('h2', {}, t('keys.edit')), field(t('keys.models_help'), models), field(t('keys.labels_help'), labels),
  policy.el, limits.el, paths.el, err, h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, t('keys.save')))));
}

async function renderBatch(root, ctx) {
  const { t, fmt, api } = ctx;
  const selector = h('input', { type: 'text', id: 'batch-selector', required: true, placeholder: 'team=web,env!=prod' });
  const op = h('select', { id: 'batch-op' }, ['disable', 'enable', 'set_policy', 'set_limits', 'set_billing_account']
    .map((o) => h('option', { value: o }, operationText(t, o))));
  const policy = policyFields(t);
  const limits = limitsFields(t, {}, t('keys.limits'));
  const billing = h('input', { type: 'text', id: 'batch-billing' });
  const billingField = field(t('keys.billing_account'), billing);
  const err = errorLine();
  const preview = h('div', { id: 'batch-preview', 'aria-live': 'polite' });
  const apply = h('button', { type: 'button', class: 'primary', id: 'batch-apply', disabled: true }, t('keys.apply'));
  let previewed = null; // the body the preview shown is of

  function body() {
    const b = { selector: selector.value.trim(), operation: op.value };
    if (op.value === 'set_policy') b.policy = policy.value();
    if (op.value === 'set_limits') b.limits = limits.value();
    if (op.value === 'set_billing_account') b.billing_account = billing.value.trim();
    return b;
  }
  function showFields() {
    policy.el.hidden = op.value !== 'set_policy';
    limits.el.hidden = op.value !== 'set_limits';
    billingField.hidden = op.value !== 'set_billing_account';
  }
  // Any change after the preview: the preview no longer says what Apply
  // would do, so Apply waits for a new one.
  function stale() {
    previewed = null;
    apply.disabled = true;
    showFields();
  }
  function show(r) {
    const counts = { changed: fmt.number(r.changed.length), unchanged: fmt.number(r.unchanged.length), skipped: fmt.number(r.skipped.length) };
    const rows = r.changed.flatMap((d) => Object.entries(d.fields).map(([f, c]) => [d.id, f, JSON.stringify(c.before), JSON.stringify(c.after)]));
    fill(preview,
      h('p', { id: 'batch-summary' }, r.dry_run ? t('keys.batch.would', counts) : t('keys.batch.did', counts)),
      table(t('keys.batch.changes', { selector: r.selector }), [t('keys.id'), t('keys.batch.field'), t('keys.batch.before'), t('keys.batch.after')], rows),
      r.unchanged.length ? h('p', {}, t('keys.batch.unchanged', { ids: r.unchanged.join(', ') })) : null,
      r.skipped.length ? table(t('keys.batch.skipped'), [t('keys.id'), t('keys.batch.reason')], r.skipped.map((s) => [s.id, s.reason])) : null);
  }
  const form = h('form', { class: 'card key-form', oninput: stale, onchange: stale, onsubmit: async (e) => {
    e.preventDefault();
    err.textContent = '';
    const b = body();
    try {
      const r = await api.post('/admin/keys/batch', { ...b, dry_run: true });
      show(r);
      previewed = b;
      apply.disabled = false;
    } catch (e2) {
      err.textContent = e2.message;
      fill(preview);
    }
  } }, field(t('keys.selector'), selector), field(t('keys.batch.operation'), op), policy.el, limits.el, billingField, err,
  h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'batch-preview-button' }, t('keys.preview')), apply));
  apply.addEventListener('click', async () => {
    if (!previewed || !(await ctx.confirm(t('keys.confirm.batch', { op: operationText(t, previewed.operation), selector: previewed.selector })))) return;
    try {
      show(await api.post('/admin/keys/batch', previewed));
      apply.disabled = true;
      previewed = null;
      ctx.toast(t('keys.done'));
    } catch (e) {
      err.textContent = e.message;
    }
  });
  showFields();
  root.append(h('p', {}, h('a', { href: '#/keys' }, t('keys.back'))), h('h1', {}, t('keys.batch')),
    h('p', { class: 'muted' }, t('keys.batch.help')), form, preview);
}

export default {
  async render(root, ctx) {
    const rest = decodeURIComponent(location.hash.replace(/^#\/?keys\/?/, ''));
    if (rest === 'new' && ctx.canWrite) return renderCreate(root, ctx);
    if (rest === 'batch' && ctx.canWrite) return renderBatch(root, ctx);
    if (rest && rest !== 'new' && rest !== 'batch') return renderKey(root, ctx, rest);
    return renderList(root, ctx);
  },
};
