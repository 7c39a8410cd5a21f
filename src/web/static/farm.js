// @ts-check
/**
 * The farm's front door's live part (src/web/pages/farm.tsx): the page is
 * complete without this script; with it, on an event of the portal's stream
 * that changes a node (online/offline, a job, a run, a reservation), the page
 * fetches itself and swaps in the server-rendered table (parsed with
 * DOMParser, so nothing is rendered twice; sections.js).
 */

import { PAGE_EVENTS, pageRefresher, swap } from './sections.js';

const SECTIONS = ['farm-summary', 'farm-nodes'];
const statusLine = document.getElementById('live-status');

const refresh = pageRefresher(
  (doc) => {
    for (const id of SECTIONS) swap(doc, id);
  },
  (message) => {
    if (statusLine) statusLine.textContent = message;
  },
);

const events = new EventSource('/app/events');
for (const type of PAGE_EVENTS) events.addEventListener(type, () => void refresh());
events.addEventListener('open', () => {
  document.getElementById('farm-front')?.setAttribute('data-live', 'on');
  // Whatever happened while the stream was away.
  void refresh();
});

