// @ts-check
/**
 * The front door's live part (src/web/pages/front.tsx): the page is complete
 * without this script; with it, the page follows the node through the event
 * stream (`/app/events`) and the reservation forms call the v2 API.
 *
 * On an event that changes what the page shows, the page fetches itself and
 * swaps in the new server-rendered sections (parsed with DOMParser, so nothing
 * is rendered twice and nothing is built from strings here).
 */
import { api } from './api.js';
import { PAGE_EVENTS, minutes, pageRefresher, swap } from './sections.js';

const front = /** @type {HTMLElement} */ (document.getElementById('front'));
const nodeId = front.dataset.nodeId ?? '';
const status = document.getElementById('live-status');

/** Sections replaced whole on an update. */
const SECTIONS = ['front-notices', 'node-state', 'reservation-state', 'job', 'latest'];

function showForms() {
  for (const el of document.querySelectorAll('#reservation-controls .needs-js')) el.removeAttribute('hidden');
}

/** @param {string} text */
function say(text) {
  if (status) status.textContent = text;
}

/** Swap in the new sections; the reservation forms only when their mode changed (a half-typed message stays). */
const refresh = pageRefresher((doc) => {
  for (const id of SECTIONS) swap(doc, id);
  const mine = document.getElementById('reservation-controls');
  const theirs = doc.getElementById('reservation-controls');
  if (mine && theirs && (mine.dataset.mode !== theirs.dataset.mode || mine.dataset.reservationId !== theirs.dataset.reservationId)) {
    mine.replaceWith(document.importNode(theirs, true));
    showForms();
  }
  front.dataset.updated = String(Date.now());
}, say);

/** @param {string} action @param {FormData} data */
async function act(action, data) {
  const rid = document.getElementById('reservation-state')?.dataset.reservationId ?? '';
  if (action === 'reserve') {
    const secs = minutes(data, 'minutes');
    /** @type {{node_ids: string[], message: string, duration_secs?: number}} */
    const body = { node_ids: [nodeId], message: String(data.get('message') ?? '') };
    if (secs !== undefined) body.duration_secs = secs;
    await api('POST', '/api/v2/reservations', body);
  } else if (action === 'extend') {
    await api('POST', `/api/v2/reservations/${encodeURIComponent(rid)}/extend`, { duration_secs: minutes(data, 'minutes') });
  } else if (action === 'end') {
    await api('DELETE', `/api/v2/reservations/${encodeURIComponent(rid)}`);
  } else if (action === 'interrupt') {
    await api('POST', `/api/v2/reservations/${encodeURIComponent(rid)}/interrupt`, { message: String(data.get('message') ?? '') });
  }
}

front.addEventListener('submit', (ev) => {
  const form = ev.target;
  if (!(form instanceof HTMLFormElement) || !form.classList.contains('res-form')) return;
  ev.preventDefault();
  const error = document.getElementById('res-error');
  if (error) error.textContent = '';
  const button = form.querySelector('button');
  if (button) button.disabled = true;
  act(form.dataset.action ?? '', new FormData(form))
    .then(refresh)
    .catch((/** @type {unknown} */ e) => {
      if (error) error.textContent = e instanceof Error ? e.message : String(e);
    })
    .finally(() => {
      if (button) button.disabled = false;
    });
});

showForms();
const events = new EventSource('/app/events');
for (const type of PAGE_EVENTS) events.addEventListener(type, () => void refresh());
events.addEventListener('open', () => {
  front.dataset.live = 'yes';
  say('');
});
events.addEventListener('error', () => say('Live updates paused; reconnecting...'));
