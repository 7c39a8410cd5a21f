// @ts-check
/**
 * The result page's script: the run log and the video on one clock. Each log
 * line has `data-time` (its UTC stamp); the video has `data-video-start` (the
 * wall-clock time of its first frame, from video.json). Video time of a line =
 * data-time - data-video-start. Choosing a line's time seeks the video there;
 * as the video plays, the line under the playhead is highlighted
 * (`class="current"`, `aria-current="true"`). Also "Run this test case again".
 */
import { api, ApiError } from './api.js';

const video = /** @type {HTMLVideoElement | null} */ (document.getElementById('run-video'));
const log = document.getElementById('runlog');

/** @param {string} iso  a stamp with microseconds: Date.parse keeps milliseconds, the rest is added */
function epochMs(iso) {
  const micros = /\.(\d{6})/.exec(iso);
  return Date.parse(iso) + (micros ? Number(micros[1].slice(3)) / 1000 : 0);
}

if (video && log) {
  const start = epochMs(video.dataset.videoStart ?? '');
  /** @type {{ li: HTMLElement, t: number }[]} lines with a time, in video seconds, in order */
  const lines = [];
  for (const li of /** @type {NodeListOf<HTMLElement>} */ (log.querySelectorAll('li[data-time]'))) {
    lines.push({ li, t: (epochMs(li.dataset.time ?? '') - start) / 1000 });
  }
  // Log lines are written in time order; a stable sort keeps equal stamps in log order.
  const sorted = [...lines].sort((a, b) => a.t - b.t);

  /** @param {number} t */
  const seek = (t) => {
    video.currentTime = Math.max(0, Math.min(t, Number.isFinite(video.duration) ? video.duration : t));
  };

  log.addEventListener('click', (e) => {
    const target = /** @type {HTMLElement} */ (e.target);
    const li = target.closest('li[data-time]');
    if (!li || (target.closest('a') === null && window.getSelection()?.toString())) return; // selecting text is not a click
    const line = lines.find((l) => l.li === li);
    if (!line) return;
    e.preventDefault();
    seek(line.t);
    history.replaceState(null, '', `#t=${Math.max(0, line.t).toFixed(3)}`);
  });

  /** @type {HTMLElement | null} */
  let current = null;
  /** The last line at or before the playhead (binary search). */
  const highlight = () => {
    const t = video.currentTime;
    let lo = 0;
    let hi = sorted.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid].t <= t + 1e-3) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const li = found < 0 ? null : sorted[found].li;
    if (li === current) return;
    current?.classList.remove('current');
    current?.removeAttribute('aria-current');
    current = li;
    if (!li) return;
    li.classList.add('current');
    li.setAttribute('aria-current', 'true');
    // Keep the line in view inside the log pane while playing, without moving the page.
    if (!video.paused) {
      const box = log.getBoundingClientRect();
      const r = li.getBoundingClientRect();
      if (r.top < box.top || r.bottom > box.bottom) log.scrollTop += r.top - box.top - box.height / 3;
    }
  };
  /** While playing, follow every frame; timeupdate alone fires only about 4 times a second. */
  const follow = () => {
    highlight();
    if (!video.paused && !video.ended) requestAnimationFrame(follow);
  };
  video.addEventListener('timeupdate', highlight);
  video.addEventListener('seeked', highlight);
  video.addEventListener('play', () => requestAnimationFrame(follow));

  // A shared link with #t=<seconds> opens at that moment.
  const fromHash = () => {
    const m = /^#t=(\d+(?:\.\d+)?)$/.exec(location.hash);
    if (m) seek(Number(m[1]));
  };
  if (video.readyState >= 1) fromHash();
  else video.addEventListener('loadedmetadata', fromHash, { once: true });
  window.addEventListener('hashchange', fromHash);
}

const rerun = /** @type {HTMLButtonElement | null} */ (document.getElementById('rerun'));
const status = document.getElementById('rerun-status');
if (rerun && status) {
  rerun.addEventListener('click', async () => {
    const d = rerun.dataset;
    rerun.disabled = true;
    status.textContent = 'Starting…';
    try {
      /** @type {Record<string, unknown>} */
      const body = { node_id: d.node, test_pack_revision: d.revision, test_cases: [d.testCase] };
      if (d.remote) body.remote_control = d.remote;
      const job = await api('POST', '/api/v2/run_tests', body);
      status.textContent = '';
      const a = document.createElement('a');
      a.href = `/app/jobs${job.job_uid}`; // job_uid starts with '/'
      a.textContent = `Job ${job.job_uid} started`;
      a.dataset.jobUid = job.job_uid;
      status.append(a, '.');
    } catch (e) {
      status.textContent = e instanceof ApiError ? `Not started: ${e.message}` : `Not started: ${String(e)}`;
    } finally {
      rerun.disabled = false;
    }
  });
}
