// @ts-check
/**
 * The portal's one way to call the daemon from a page: the project's own HTTP API
 * (v2 mostly), with the session cookie and the CSRF token of the page
 * (`<meta name="csrf-token">`, sent back as `X-CSRF-Token` on every
 * state-changing request). Errors come back as the API's JSON
 * `{error, message}`, thrown as an {@link ApiError}.
 */

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** @returns {string | null} */
export function csrfToken() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.getAttribute('content') : null;
}

/** @type {Promise<{login: string | null, csrf: string | null} | null> | undefined} */
let portalSession;

/**
 * The person reading a node's page through the portal: the node renders its pages without her name or CSRF token
 * (the portal tells it neither), so the portal's scripts ask the portal (`GET /app/session`), once per page.
 * @returns {Promise<{login: string | null, csrf: string | null} | null>}
 */
export function pageSession() {
  portalSession ??= fetch('/app/session', { headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null);
  return portalSession;
}

/** The page's CSRF token: its `<meta>`, or on a node's page seen through the portal, the portal's session's. */
async function csrfTokenOfPage() {
  const meta = csrfToken();
  if (meta) return meta;
  if (!document.querySelector('[data-portal-session]')) return null;
  return (await pageSession())?.csrf ?? null;
}

// A node's page through the portal: its "Signed in as" gets the name from the portal, and its sign-out form the token
// only as it is sent (never kept in the page, where the node's markup could reach it).
const who = document.querySelector('form[data-portal-session]');
if (who instanceof HTMLFormElement) {
  void pageSession().then((s) => {
    const name = who.querySelector('[data-portal-login]');
    if (s?.login && name) name.textContent = s.login;
  });
  who.addEventListener('submit', (e) => {
    const field = who.querySelector('input[name="csrf"]');
    if (!(field instanceof HTMLInputElement) || field.value) return;
    e.preventDefault();
    void pageSession().then((s) => {
      field.value = s?.csrf ?? '';
      who.submit();
    });
  });
}

/**
 * @param {string} method
 * @param {string} path  e.g. `/api/v2/nodes/<id>/press`
 * @param {unknown} [body]  sent as JSON
 * @returns {Promise<any>} the parsed JSON answer (null for an empty one)
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const token = method !== 'GET' && method !== 'HEAD' ? await csrfTokenOfPage() : null;
  if (token) headers['X-CSRF-Token'] = token;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  const text = await res.text();
  /** @type {any} */
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: 'bad_response', message: text.slice(0, 200) };
  }
  if (!res.ok) throw new ApiError(res.status, data?.error ?? 'http_' + res.status, data?.message ?? res.statusText);
  return data;
}
