// @ts-check
/**
 * The farm's front door's live part (src/web/pages/farm.tsx): the page is
 * complete without this script; with it, on an event of the portal's stream
 * that changes a node (online/offline, a job, a run, a reservation), the page
 * fetches itself and swaps in the server-rendered table (parsed with
 * DOMParser, so nothing is rendered twice). One fetch at a time, and one more
 * if events came meanwhile.
 */

const SECTIONS = ['farm-summary', 'farm-nodes'];
const EVENTS = [
  'job.started',
  'run.started',
  'run.finished',
  'job.exited',
  'node.online',
  'node.offline',
  'reservation.made',
  'reservation.extended',
  'reservation.ended',
  'reservation.interrupted',
];
const statusLine = document.getElementById('live-status');

let pending = false;
let again = false;

async function refresh() {
  if (pending) {
    again = true;
    return;
  }
  pending = true;
  try {
    do {
      again = false;
      const res = await fetch(location.pathname, { headers: { Accept: 'text/html' }, credentials: 'same-origin' });
      if (!res.ok) throw new Error(`the page answered ${res.status}`);
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      for (const id of SECTIONS) {
        const mine = document.getElementById(id);
        const theirs = doc.getElementById(id);
        if (mine && theirs) mine.replaceWith(document.importNode(theirs, true));
      }
    } while (again);
  } catch (e) {
    if (statusLine) statusLine.textContent = `Could not update the page: ${e instanceof Error ? e.message : String(e)}`;
  } finally {
    pending = false;
  }
}

const events = new EventSource('/app/events');
for (const type of EVENTS) events.addEventListener(type, () => void refresh());
events.addEventListener('open', () => {
  document.getElementById('farm-front')?.setAttribute('data-live', 'on');
  // Whatever happened while the stream was away.
  void refresh();
});

export {};
