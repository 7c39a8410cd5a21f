// @ts-check
/**
 * The video wall's live part (src/web/pages/wall.tsx, docs/video-wall.md): the pictures of the tiles on screen
 * come over one event stream, `/app/wall/frames?nodes=<the visible tiles>`, reopened when the set of visible
 * tiles changes (IntersectionObserver) and closed while the page is hidden (a background tab asks the nodes for
 * nothing). The tiles' state and job follow the portal's event stream: the page fetches itself and swaps in each
 * tile's text, never its picture.
 */

import { PAGE_EVENTS, pageRefresher, swap } from './sections.js';

const wall = /** @type {HTMLElement} */ (document.getElementById('wall'));
const statusLine = document.getElementById('live-status');
/** @type {Map<string, HTMLElement>} */
const tiles = new Map();
for (const el of document.querySelectorAll('.wall-tile')) {
  if (el instanceof HTMLElement && el.dataset.nodeId) tiles.set(el.dataset.nodeId, el);
}
/** @type {Set<string>} */
const visible = new Set();
/** @type {EventSource | undefined} */
let frames;
let streamKey = '';
/** @type {ReturnType<typeof setTimeout> | undefined} */
let pending;

/** Open (or reopen, or close) the pictures' stream for the tiles on screen now. */
function follow() {
  const ids = document.hidden ? [] : [...visible].sort();
  const key = ids.join(',');
  if (key === streamKey && (frames || !key)) return;
  frames?.close();
  frames = undefined;
  streamKey = key;
  wall.dataset.watching = key;
  if (!key) return;
  const es = new EventSource(`/app/wall/frames?nodes=${encodeURIComponent(key)}`);
  es.addEventListener('frame', (ev) => show(JSON.parse(/** @type {MessageEvent} */ (ev).data)));
  es.addEventListener('nopicture', (ev) => show(JSON.parse(/** @type {MessageEvent} */ (ev).data)));
  es.addEventListener('open', () => wall.setAttribute('data-frames', 'on'));
  frames = es;
}

/** Soon: several tiles scrolling in or out at once make one new stream. */
function followSoon() {
  clearTimeout(pending);
  pending = setTimeout(follow, 150);
}

/** @param {{node_id: string, seq: number, jpeg?: string, reason?: string}} f */
function show(f) {
  const tile = tiles.get(f.node_id);
  const img = tile?.querySelector('img.wall-picture');
  const note = tile?.querySelector('.wall-nopicture');
  if (!tile || !(img instanceof HTMLImageElement)) return;
  if (f.jpeg) {
    img.src = `data:image/jpeg;base64,${f.jpeg}`;
    img.hidden = false;
    if (note) note.textContent = '';
    tile.dataset.frames = String(Number(tile.dataset.frames ?? 0) + 1);
  } else {
    img.hidden = true;
    if (note) note.textContent = `No picture: ${f.reason ?? 'unknown reason'}`;
  }
  tile.dataset.seq = String(f.seq);
}

const seen = new IntersectionObserver((entries) => {
  for (const e of entries) {
    const id = e.target instanceof HTMLElement ? e.target.dataset.nodeId : undefined;
    if (!id) continue;
    if (e.isIntersecting) visible.add(id);
    else visible.delete(id);
  }
  followSoon();
});
for (const t of tiles.values()) seen.observe(t);
document.addEventListener('visibilitychange', follow);

const refresh = pageRefresher(
  (doc) => {
    for (const id of tiles.keys()) swap(doc, `tile-info-${id}`);
    swap(doc, 'wall-summary');
    wall.dataset.updated = String(Date.now());
  },
  (message) => {
    if (statusLine) statusLine.textContent = message;
  },
);
const events = new EventSource('/app/events');
for (const type of PAGE_EVENTS) events.addEventListener(type, () => void refresh());
events.addEventListener('open', () => {
  wall.setAttribute('data-live', 'on');
  void refresh();
});
