// @ts-check
/**
 * The queue page's Cancel buttons (src/web/pages/queue.tsx): shown only with JavaScript, to the person who
 * queued the job or an administrator; each calls `DELETE /api/v2/queue/<queue_id>` (api.js: the session cookie
 * and the page's CSRF token) and reloads the page, or says the API's error beside the button.
 */

import { api } from './api.js';

for (const el of document.querySelectorAll('#queue-page .needs-js')) el.removeAttribute('hidden');

document.getElementById('queue-page')?.addEventListener('submit', (ev) => {
  const form = ev.target;
  if (!(form instanceof HTMLFormElement) || !form.classList.contains('queue-cancel')) return;
  ev.preventDefault();
  const error = form.querySelector('.form-error');
  const button = form.querySelector('button');
  if (button) button.disabled = true;
  api('DELETE', `/api/v2/queue/${encodeURIComponent(form.dataset.queueId ?? '')}`)
    .then(() => location.reload())
    .catch((/** @type {unknown} */ e) => {
      if (error) error.textContent = e instanceof Error ? e.message : String(e);
      if (button) button.disabled = false;
    });
});
