// @ts-check
/**
 * The farm's front door's live part (src/web/pages/farm.tsx): the page is
 * complete without this script; with it, on an event of the portal's stream
 * that changes a node (online/offline, a job, a run, a reservation), the page
 * fetches itself and swaps in the server-rendered table (parsed with
 * DOMParser, so nothing is rendered twice; sections.js), and the reservation
 * forms call the portal's v2 API (api.js: the session cookie and the page's
 * CSRF token), as the node's front door's do (front.js).
 */

import { api } from './api.js';
import { PAGE_EVENTS, minutes, pageRefresher, swap } from './sections.js';

const SECTIONS = ['farm-summary', 'farm-nodes'];
const front = /** @type {HTMLElement} */ (document.getElementById('farm-front'));
const statusLine = document.getElementById('live-status');

function showForms() {
  for (const el of document.querySelectorAll('#farm-front .needs-js')) el.removeAttribute('hidden');
}

/**
 * What the reader has done in the table that a swap must not undo: ticked nodes, half-typed
 * inputs, an error shown beside a row's form. Kept by element id.
 */
function tableState() {
  /** @type {Map<string, {value?: string, checked?: boolean, error?: string}>} */
  const kept = new Map();
  for (const el of document.querySelectorAll('#farm-nodes [id]')) {
    if (el instanceof HTMLInputElement) kept.set(el.id, { value: el.value, checked: el.checked });
    else if (el.classList.contains('form-error') && el.textContent) kept.set(el.id, { error: el.textContent });
  }
  const focused = document.activeElement instanceof HTMLElement && document.activeElement.closest('#farm-nodes') ? document.activeElement.id : '';
  return () => {
    for (const [id, v] of kept) {
      const el = document.getElementById(id);
      if (el instanceof HTMLInputElement) {
        if (v.value !== undefined && el.type !== 'checkbox') el.value = v.value;
        if (v.checked !== undefined) el.checked = v.checked;
      } else if (el && v.error !== undefined) el.textContent = v.error;
    }
    if (focused) document.getElementById(focused)?.focus();
  };
}

const refresh = pageRefresher(
  (doc) => {
    const restore = tableState();
    for (const id of SECTIONS) swap(doc, id);
    restore();
    showForms();
    front.dataset.updated = String(Date.now());
  },
  (message) => {
    if (statusLine) statusLine.textContent = message;
  },
);

/** @param {HTMLFormElement} form */
async function act(form) {
  const action = form.dataset.action ?? '';
  const data = new FormData(form);
  if (action === 'reserve') {
    // The ticked rows' boxes belong to this form (form="farm-reserve"), so FormData has them.
    const nodeIds = data.getAll('node_ids').map(String);
    if (nodeIds.length === 0) throw new Error('Tick one or more nodes in the table first.');
    const secs = minutes(data, 'minutes');
    /** @type {{node_ids: string[], message: string, duration_secs?: number}} */
    const body = { node_ids: nodeIds, message: String(data.get('message') ?? '') };
    if (secs !== undefined) body.duration_secs = secs;
    await api('POST', '/api/v2/reservations', body);
    for (const box of document.querySelectorAll('#farm-nodes input[name="node_ids"]')) {
      if (box instanceof HTMLInputElement) box.checked = false;
    }
    return;
  }
  const rid = form.closest('.row-res')?.getAttribute('data-reservation-id') ?? '';
  if (action === 'extend') {
    await api('POST', `/api/v2/reservations/${encodeURIComponent(rid)}/extend`, { duration_secs: minutes(data, 'minutes') });
  } else if (action === 'end') {
    await api('DELETE', `/api/v2/reservations/${encodeURIComponent(rid)}`);
  } else if (action === 'interrupt') {
    await api('POST', `/api/v2/reservations/${encodeURIComponent(rid)}/interrupt`, { message: String(data.get('message') ?? '') });
  }
}

/** The error paragraph next to a form: the reserve form's own, else its row's. */
function errorOf(/** @type {HTMLFormElement} */ form) {
  return form.querySelector('.form-error') ?? form.closest('.row-res')?.querySelector('.form-error') ?? null;
}

front.addEventListener('submit', (ev) => {
  const form = ev.target;
  if (!(form instanceof HTMLFormElement) || !form.classList.contains('res-form')) return;
  ev.preventDefault();
  const error = errorOf(form);
  if (error) error.textContent = '';
  const button = form.querySelector('button');
  if (button) button.disabled = true;
  act(form)
    .then(refresh)
    .catch((/** @type {unknown} */ e) => {
      // The error goes beside the form; a row's may have been swapped meanwhile: look it up again by id.
      const el = (error?.id && document.getElementById(error.id)) || error;
      if (el) el.textContent = e instanceof Error ? e.message : String(e);
    })
    .finally(() => {
      if (button) button.disabled = false;
    });
});

showForms();
const events = new EventSource('/app/events');
for (const type of PAGE_EVENTS) events.addEventListener(type, () => void refresh());
events.addEventListener('open', () => {
  front.setAttribute('data-live', 'on');
  // Whatever happened while the stream was away.
  void refresh();
});
