// @ts-check
/**
 * The job page, live: counts, the test case running now and the job's state
 * follow the event stream (`run.started`, `run.finished`, `job.exited` of this
 * job); the running test's log is followed by polling its log URL once a
 * second with `Range: bytes=<what we have>-` (206: the new bytes; 416: nothing
 * new yet); Stop calls the v2 stop endpoint.
 */
import { api } from './api.js';

const LOG_POLL_MS = 1000;
/** Lines kept in the tail; older ones scroll away. */
const MAX_LINES = 400;

const root = /** @type {HTMLElement | null} */ (document.getElementById('job'));

/** @param {string} id @returns {HTMLElement | null} */
const el = (id) => document.getElementById(id);

/**
 * An ISO time as the server renders it (`yyyy-MM-dd HH:mm:ss` in the page's zone).
 * @param {string} iso @param {string} tz
 */
function formatTime(iso, tz) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  try {
    return new Intl.DateTimeFormat('sv-SE', { timeZone: tz || 'UTC', dateStyle: 'short', timeStyle: 'medium' }).format(d);
  } catch {
    return iso;
  }
}

/** @param {string} iso @param {string} tz */
function timeElement(iso, tz) {
  const t = document.createElement('time');
  t.dateTime = iso;
  t.textContent = formatTime(iso, tz);
  return t;
}

if (root) {
  const jobUid = root.dataset.jobUid ?? '';
  const tail = /** @type {HTMLPreElement} */ (el('log-tail'));
  let resultId = root.dataset.resultId ?? '';
  let offset = Number(root.dataset.logOffset ?? '0');
  let decoder = new TextDecoder();
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;

  /** @param {string} text */
  const appendLog = (text) => {
    if (!text) return;
    const atBottom = tail.scrollTop + tail.clientHeight >= tail.scrollHeight - 4;
    const lines = (tail.textContent + text).split('\n');
    tail.textContent = lines.slice(-MAX_LINES).join('\n');
    if (atBottom) tail.scrollTop = tail.scrollHeight;
  };

  const pollLog = async () => {
    timer = undefined;
    const id = resultId;
    if (!id) return;
    try {
      const res = await fetch(`/api/v1/result${id}/farmhand.log`, { headers: { Range: `bytes=${offset}-` }, credentials: 'same-origin', cache: 'no-store' });
      if (id !== resultId) return; // the run changed meanwhile
      if (res.status === 206 || res.status === 200) {
        const buf = new Uint8Array(await res.arrayBuffer());
        if (res.status === 200) {
          // The whole log (the server ignored the Range): start again from it.
          tail.textContent = '';
          decoder = new TextDecoder();
          offset = 0;
        }
        offset += buf.byteLength;
        appendLog(decoder.decode(buf, { stream: true }));
      }
    } catch (err) {
      console.warn('job: log poll failed', err);
    }
    if (id === resultId && root.dataset.status === 'running') timer = setTimeout(pollLog, LOG_POLL_MS);
    root.dataset.logPolls = String(Number(root.dataset.logPolls ?? '0') + 1);
  };

  /** @param {string} id @param {string} testCase @param {string} startTime */
  const followRun = (id, testCase, startTime) => {
    resultId = id;
    offset = 0;
    decoder = new TextDecoder();
    tail.textContent = '';
    tail.hidden = false;
    const now = el('running-now');
    if (now) {
      const a = document.createElement('a');
      a.href = `/app/results${id}`;
      a.id = 'running-test';
      a.textContent = testCase;
      now.replaceChildren(a, ' since ', timeElement(startTime, root.dataset.tz ?? ''));
    }
    if (timer) clearTimeout(timer);
    pollLog();
  };

  /** @param {{ pass: number, fail: number, error: number, total: number }} c */
  const showCounts = (c) => {
    for (const k of /** @type {const} */ (['pass', 'fail', 'error', 'total'])) {
      const d = el(`count-${k}`);
      if (d) d.textContent = String(c[k]);
    }
  };

  /** @param {string} id */
  const addResultRow = async (id) => {
    const table = /** @type {HTMLTableElement | null} */ (el('job-results'));
    const tbody = table?.tBodies[0];
    if (!table || !tbody || tbody.querySelector(`tr[data-result-id="${CSS.escape(id)}"]`)) return;
    const q = new URLSearchParams({ filter: table.dataset.filter ?? '', tz: table.dataset.tz ?? '', result_id: id });
    const res = await fetch(`/app/results/row?${q}`, { credentials: 'same-origin' });
    if (res.status !== 200) return;
    const row = new DOMParser().parseFromString(await res.text(), 'text/html').querySelector('tr[data-result-id]');
    if (!row || tbody.querySelector(`tr[data-result-id="${CSS.escape(id)}"]`)) return;
    tbody.insertBefore(document.importNode(row, true), tbody.firstChild);
    el('no-results')?.remove();
  };

  const events = new EventSource('/app/events');
  /** @param {string} type @param {(d: any) => void} fn */
  const on = (type, fn) =>
    events.addEventListener(type, (e) => {
      const ev = JSON.parse(/** @type {MessageEvent<string>} */ (e).data);
      if (ev.data?.job_uid === jobUid) fn(ev.data);
    });
  on('run.started', (d) => {
    // `total` is the planned runs of a run-once job; a soak job counts each run as it starts (as the API does).
    const total = el('count-total');
    if (total && root.dataset.soak === 'run forever') total.textContent = String(Number(total.textContent ?? '0') + 1);
    followRun(d.result_id, d.test_case, d.start_time);
  });
  on('run.finished', (d) => {
    const c = { pass: 0, fail: 0, error: 0, total: 0 };
    for (const k of /** @type {const} */ (['pass', 'fail', 'error', 'total'])) c[k] = Number(el(`count-${k}`)?.textContent ?? '0');
    if (d.result === 'pass' || d.result === 'fail' || d.result === 'error') c[/** @type {'pass'|'fail'|'error'} */ (d.result)] += 1;
    showCounts(c);
    addResultRow(d.result_id).catch((err) => console.warn('job: could not add the row', err));
  });
  on('job.exited', (d) => {
    root.dataset.status = 'exited';
    if (d.result_counts) showCounts(d.result_counts);
    const st = el('job-status');
    if (st) {
      st.textContent = 'exited';
      st.className = 'job-state exited';
    }
    const end = el('job-end');
    if (end && d.end_time) end.replaceChildren(' · ended ', timeElement(d.end_time, root.dataset.tz ?? ''));
    const now = el('running-now');
    if (now) now.textContent = 'Nothing: the job has ended.';
    const actions = el('job-actions');
    if (actions) actions.hidden = true;
    // One last read, so the tail ends with the run's last lines.
    if (timer) clearTimeout(timer);
    pollLog();
  });
  events.addEventListener('open', () => {
    root.dataset.live = 'on';
  });

  const stop = /** @type {HTMLButtonElement | null} */ (el('stop-job'));
  stop?.addEventListener('click', async () => {
    const status = el('stop-status');
    stop.disabled = true;
    if (status) status.textContent = 'Stopping…';
    try {
      const job = await api('POST', `/api/v2/jobs${jobUid}/stop`);
      if (status) status.textContent = job?.status === 'exited' ? 'Stopped.' : 'Stop requested; the test is ending.';
    } catch (err) {
      stop.disabled = false;
      if (status) status.textContent = `Could not stop: ${err instanceof Error ? err.message : String(err)}`;
    }
  });

  if (resultId && root.dataset.status === 'running') timer = setTimeout(pollLog, LOG_POLL_MS);
}
