// The admin API, called with the session cookie. Writes carry the
// session's CSRF token; an answer that is not 2xx becomes an ApiError with
// the server's code and message (the admin API's OpenAI-style envelope).

let csrf = '';

export function setCSRF(token) { csrf = token; }

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// onSignedOut is called when the server says the session is gone.
let onSignedOut = () => {};
export function whenSignedOut(fn) { onSignedOut = fn; }

// call sends method path with body (an object, sent as JSON) and returns
// the decoded answer (null for 204). headers adds request headers.
export async function call(method, path, body, headers) {
  const h = { Accept: 'application/json', ...(headers || {}) };
  if (method !== 'GET' && method !== 'HEAD') h['X-Sluice-CSRF'] = csrf;
  const init = { method, headers: h, credentials: 'same-origin' };
  if (body !== undefined) {
    h['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    const e = (data && data.error) || {};
    if (r.status === 401 && path !== '/console/session') onSignedOut();
    throw new ApiError(r.status, e.code || String(r.status), e.message || text || r.statusText);
  }
  return data;
}

export const get = (path) => call('GET', path);
export const post = (path, body, headers) => call('POST', path, body, headers);
export const put = (path, body, headers) => call('PUT', path, body, headers);
export const patch = (path, body) => call('PATCH', path, body);
export const del = (path, body) => call('DELETE', path, body);

// query builds "?a=1&b=2" from the set values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}
