// @ts-check
/**
 * Pages that follow the event stream by fetching themselves (the node's front
 * door, the farm's): on an event, the page fetches its own URL and swaps in the
 * server-rendered sections (parsed with DOMParser, so nothing is rendered twice
 * and nothing is built from strings here). One fetch at a time, and one more if
 * events came meanwhile.
 */

/** The events that change what a front door shows. */
export const PAGE_EVENTS = [
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

/**
 * Replace the element `id` of this page by the one of `doc`, when both have it.
 * @param {Document} doc
 * @param {string} id
 */
export function swap(doc, id) {
  const mine = document.getElementById(id);
  const theirs = doc.getElementById(id);
  if (mine && theirs) mine.replaceWith(document.importNode(theirs, true));
}

/**
 * A function that refreshes the page: `update(doc)` swaps what it wants from the fetched page;
 * `fail(message)` is told when the page could not be fetched.
 * @param {(doc: Document) => void} update
 * @param {(message: string) => void} fail
 * @returns {() => Promise<void>}
 */
export function pageRefresher(update, fail) {
  let pending = false;
  let again = false;
  return async function refresh() {
    if (pending) {
      again = true;
      return;
    }
    pending = true;
    try {
      do {
        again = false;
        const res = await fetch(location.pathname + location.search, { headers: { Accept: 'text/html' }, credentials: 'same-origin' });
        if (!res.ok) throw new Error(`the page answered ${res.status}`);
        update(new DOMParser().parseFromString(await res.text(), 'text/html'));
      } while (again);
    } catch (e) {
      fail(`Could not update the page: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      pending = false;
    }
  };
}

/**
 * A reservation form's "minutes" field as seconds; undefined when empty (no end).
 * @param {FormData} data @param {string} name
 */
export function minutes(data, name) {
  const raw = String(data.get(name) ?? '').trim();
  if (raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error('minutes must be a whole number, 1 or more');
  return n * 60;
}
