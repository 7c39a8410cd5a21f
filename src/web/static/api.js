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
  const token = csrfToken();
  if (token && method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = token;
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
