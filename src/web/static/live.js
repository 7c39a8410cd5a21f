// @ts-check
/**
 * The live view (docs/portal.md, "Live view and web remote"):
 * - reads `<live>/stream.mjpeg` with fetch (`<live>` is the page's
 *   `data-live-base`, `/app/nodes/<id>/live`: the same path on the node and
 *   through the farm's portal), cuts it into JPEG parts and
 *   draws each into a canvas (the `<img>` of the page is the fallback
 *   without JavaScript); counts the new pictures shown per second (the
 *   daemon sends a picture only when it changed);
 * - the web remote: buttons and the keyboard press keys through
 *   `POST /api/v2/nodes/<id>/press`; the API's error is shown;
 * - the power-cycle (a node with an outlet): confirm, then
 *   `POST /api/v2/nodes/<id>/power/cycle`; its outcome is shown;
 * - reference images: drag a rectangle on the picture, name it, download
 *   the exact pixels (`/app/live/frame.png?...`) and copy the Python line.
 */
import { api, ApiError, pageSession } from './api.js';

const root = /** @type {HTMLElement} */ (document.getElementById('live'));
const nodeId = root.dataset.nodeId ?? '';
const frameW = Number(root.dataset.width);
const frameH = Number(root.dataset.height);
const signedIn = root.dataset.signedIn === 'yes';
const liveBase = root.dataset.liveBase ?? '/app/live';
const status = /** @type {HTMLElement} */ (document.getElementById('live-status'));
const errorBox = /** @type {HTMLElement} */ (document.getElementById('remote-error'));

// ---------------------------------------------------------------- the picture

const frameBox = document.getElementById('live-frame');
const img = /** @type {HTMLImageElement | null} */ (document.getElementById('live-img'));
/** Frames drawn since the page loaded (the benchmark and the tests read it from the canvas's dataset). */
let shown = 0;
/** @type {HTMLCanvasElement | null} */
let canvas = null;

if (frameBox && img && typeof createImageBitmap === 'function' && typeof ReadableStream === 'function') {
  canvas = document.createElement('canvas');
  canvas.id = 'live-canvas';
  canvas.width = frameW;
  canvas.height = frameH;
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', img.alt);
  canvas.dataset.frames = '0';
  img.replaceWith(canvas);
  img.src = ''; // ends the <img>'s own stream
  void play(canvas);
}

/** @param {HTMLCanvasElement} c */
async function play(c) {
  const ctx = /** @type {CanvasRenderingContext2D} */ (c.getContext('2d'));
  let last = performance.now();
  let counted = 0;
  let connected = false;
  // The daemon sends a picture only when it changed (a still menu sends nothing), so the figure
  // counts new pictures shown, and is refreshed every second whether a frame came or not.
  setInterval(() => {
    if (!connected) return;
    const now = performance.now();
    status.textContent = counted > 0
      ? `Live: ${((counted * 1000) / (now - last)).toFixed(1)} new pictures a second.`
      : 'Live: the picture has not changed.';
    last = now;
    counted = 0;
  }, 1000);
  for (;;) {
    try {
      const res = await fetch(`${liveBase}/stream.mjpeg`, { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok || !res.body) throw new Error(`the stream answered ${res.status}`);
      status.textContent = 'Live.';
      connected = true;
      last = performance.now();
      counted = 0;
      // Reading and drawing run apart: the reader keeps only the newest part, so a page that decodes
      // slower than frames arrive skips frames instead of falling behind (the socket's buffers would
      // otherwise hold seconds of old frames).
      /** @type {{ jpeg: Uint8Array, seq: number } | null} */
      let latest = null;
      /** @type {(() => void) | null} */
      let wake = null;
      let done = false;
      const drawing = (async () => {
        while (!done || latest) {
          if (!latest) {
            await new Promise((r) => (wake = () => r(undefined)));
            wake = null;
            continue;
          }
          const { jpeg, seq } = latest;
          latest = null;
          const bitmap = await createImageBitmap(new Blob([/** @type {BlobPart} */ (jpeg)], { type: 'image/jpeg' }));
          ctx.drawImage(bitmap, 0, 0, c.width, c.height);
          bitmap.close();
          shown++;
          counted++;
          c.dataset.frames = String(shown);
          c.dataset.seq = String(seq);
        }
      })();
      try {
        for await (const part of parts(res.body.getReader())) {
          latest = part;
          /** @type {(() => void) | null} */ (wake)?.();
        }
      } finally {
        done = true;
        /** @type {(() => void) | null} */ (wake)?.();
        await drawing;
      }
      connected = false;
      status.textContent = 'The stream ended; reconnecting...';
    } catch (e) {
      connected = false;
      status.textContent = `No picture: ${e instanceof Error ? e.message : String(e)}; retrying...`;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

const CRLF2 = [13, 10, 13, 10];

/**
 * The JPEG parts of a multipart/x-mixed-replace body whose parts carry a
 * Content-Length (the daemon's do).
 * @param {ReadableStreamDefaultReader<Uint8Array>} reader
 * @returns {AsyncGenerator<{ jpeg: Uint8Array, seq: number }>}
 */
async function* parts(reader) {
  /** @type {Uint8Array} */
  let buf = new Uint8Array(0);
  for (;;) {
    const end = indexOf(buf, CRLF2);
    if (end >= 0) {
      const head = new TextDecoder().decode(buf.subarray(0, end));
      const len = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? NaN);
      if (!Number.isFinite(len)) throw new Error('a part of the stream has no Content-Length');
      const seq = Number(/x-frame-seq:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      const start = end + 4;
      while (buf.length < start + len) {
        const r = await reader.read();
        if (r.done) return;
        buf = concat(buf, r.value);
      }
      yield { jpeg: buf.slice(start, start + len), seq };
      buf = buf.subarray(start + len);
      continue;
    }
    const r = await reader.read();
    if (r.done) return;
    buf = concat(buf, r.value);
  }
}

/**
 * @param {Uint8Array} a
 * @param {Uint8Array} b
 * @returns {Uint8Array}
 */
function concat(a, b) {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** @param {Uint8Array} hay @param {number[]} needle */
function indexOf(hay, needle) {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

// ---------------------------------------------------------------- the remote

const picker = /** @type {HTMLSelectElement | null} */ (document.getElementById('remote-picker'));
/** @returns {HTMLElement | null} */
const currentRemote = () => document.querySelector('.remote:not([hidden])');

picker?.addEventListener('change', () => {
  for (const el of document.querySelectorAll('.remote')) {
    /** @type {HTMLElement} */ (el).hidden = /** @type {HTMLElement} */ (el).dataset.remote !== picker.value;
  }
});

/** @param {string} key */
async function press(key) {
  const remote = currentRemote();
  if (!remote || !signedIn) {
    errorBox.textContent = 'Sign in to use the remote.';
    return;
  }
  errorBox.textContent = '';
  try {
    await api('POST', `/api/v2/nodes/${encodeURIComponent(nodeId)}/press`, { key, remote_control: remote.dataset.remote });
  } catch (e) {
    errorBox.textContent = e instanceof ApiError ? `${key}: ${e.message}` : `${key}: ${String(e)}`;
  }
}

document.addEventListener('click', (ev) => {
  const button = /** @type {HTMLElement} */ (ev.target).closest?.('button[data-key]');
  if (button instanceof HTMLButtonElement && !button.disabled) void press(button.dataset.key ?? '');
});

/** Keyboard keys (KeyboardEvent.key) to the remote's keys, first one the remote has wins. */
/** @type {Record<string, string[]>} */
const KEYBOARD = {
  ArrowUp: ['KEY_UP'],
  ArrowDown: ['KEY_DOWN'],
  ArrowLeft: ['KEY_LEFT'],
  ArrowRight: ['KEY_RIGHT'],
  Enter: ['KEY_OK', 'KEY_ENTER', 'KEY_SELECT'],
  Backspace: ['KEY_BACK', 'KEY_EXIT'],
  m: ['KEY_MENU', 'KEY_HOME'],
  i: ['KEY_INFO', 'KEY_EPG'],
  p: ['KEY_POWER'],
  PageUp: ['KEY_CHANNELUP'],
  PageDown: ['KEY_CHANNELDOWN'],
  '+': ['KEY_VOLUMEUP'],
  '-': ['KEY_VOLUMEDOWN'],
  ' ': ['KEY_PLAYPAUSE', 'KEY_PLAY'],
};
for (let d = 0; d <= 9; d++) KEYBOARD[String(d)] = [`KEY_${d}`];

document.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey || ev.altKey || ev.metaKey || ev.defaultPrevented) return;
  const t = /** @type {HTMLElement} */ (ev.target);
  if (t.closest('input, textarea, select, [contenteditable]')) return;
  // Enter and Space on a focused control activate it (a remote button presses its own key).
  if ((ev.key === 'Enter' || ev.key === ' ') && t.closest('button, a, summary')) return;
  const wanted = KEYBOARD[ev.key];
  const remote = currentRemote();
  if (!wanted || !remote) return;
  const have = [...remote.querySelectorAll('button[data-key]')].map((b) => /** @type {HTMLElement} */ (b).dataset.key ?? '');
  const key = wanted.map((w) => have.find((h) => h.toUpperCase() === w)).find((k) => k !== undefined);
  if (key === undefined) return;
  ev.preventDefault();
  void press(key);
});

// ---------------------------------------------------------------- the power-cycle

const ROLES = ['read', 'manual', 'run', 'admin'];
const powerPanel = document.getElementById('power-panel');
if (powerPanel) setUpPower(powerPanel);

/**
 * The "Power cycle" button (docs/power.md): a confirm step, then `POST /api/v2/nodes/<id>/power/cycle`, whose
 * answer comes once the device is on again; the outcome is written under the button. Through the portal the panel
 * comes hidden, and is shown once the portal's session says the reader's role allows manual control.
 * @param {HTMLElement} panel
 */
function setUpPower(panel) {
  const start = /** @type {HTMLButtonElement} */ (document.getElementById('power-cycle'));
  const confirmBox = /** @type {HTMLElement} */ (document.getElementById('power-confirm'));
  const yes = /** @type {HTMLButtonElement} */ (document.getElementById('power-yes'));
  const no = /** @type {HTMLButtonElement} */ (document.getElementById('power-no'));
  const said = /** @type {HTMLElement} */ (document.getElementById('power-status'));
  const offSecs = Number(panel.dataset.offSecs);
  if (panel.dataset.askPortal === 'yes') {
    void pageSession().then((s) => {
      // The portal's session names the role: below manual, hidden; null (a farm without roles), shown to the signed-in.
      const role = /** @type {{ role?: unknown } | null} */ (s)?.role;
      panel.hidden = !s?.login || (typeof role === 'string' && ROLES.indexOf(role) < ROLES.indexOf('manual'));
    });
  }
  /** @param {boolean} asking */
  const asking = (asking) => {
    confirmBox.hidden = !asking;
    start.hidden = asking;
  };
  start.addEventListener('click', () => {
    said.textContent = '';
    asking(true);
    yes.focus();
  });
  no.addEventListener('click', () => {
    asking(false);
    start.focus();
  });
  yes.addEventListener('click', async () => {
    asking(false);
    start.disabled = true;
    said.classList.remove('problem');
    said.textContent = `Power-cycling: off for ${offSecs} s, then on again...`;
    try {
      const done = await api('POST', `/api/v2/nodes/${encodeURIComponent(nodeId)}/power/cycle`, {});
      said.textContent = `Power-cycled: off for ${done.off_secs} s, on again at ${new Date(done.ended).toLocaleTimeString()}.`;
    } catch (e) {
      said.classList.add('problem');
      said.textContent = `Power cycle failed: ${e instanceof ApiError ? e.message : String(e)}`;
    } finally {
      start.disabled = false;
    }
  });
}

// ---------------------------------------------------------------- reference images

const rectEl = /** @type {HTMLElement | null} */ (document.getElementById('live-rect'));
const form = /** @type {HTMLFormElement | null} */ (document.getElementById('ref-form'));
const nameInput = /** @type {HTMLInputElement} */ (document.getElementById('ref-name'));
const download = /** @type {HTMLAnchorElement} */ (document.getElementById('ref-download'));
const python = /** @type {HTMLElement} */ (document.getElementById('ref-python'));
const regionText = /** @type {HTMLElement} */ (document.getElementById('ref-region'));
/** @type {{ x: number, y: number, width: number, height: number } | null} */
let region = null;

if (canvas && frameBox && rectEl && form) {
  const c = canvas;
  /** @type {{ x: number, y: number } | null} */
  let start = null;
  /** @param {PointerEvent} ev */
  const toFrame = (ev) => {
    const b = c.getBoundingClientRect();
    return {
      x: Math.min(frameW, Math.max(0, Math.round(((ev.clientX - b.left) / b.width) * frameW))),
      y: Math.min(frameH, Math.max(0, Math.round(((ev.clientY - b.top) / b.height) * frameH))),
    };
  };
  c.addEventListener('pointerdown', (ev) => {
    start = toFrame(ev);
    c.setPointerCapture(ev.pointerId);
    ev.preventDefault();
  });
  c.addEventListener('pointermove', (ev) => {
    if (start) show(start, toFrame(ev));
  });
  c.addEventListener('pointerup', (ev) => {
    if (!start) return;
    const end = toFrame(ev);
    const s = start;
    start = null;
    const r = show(s, end);
    if (r.width < 2 || r.height < 2) {
      rectEl.hidden = true;
      return;
    }
    region = r;
    form.hidden = false;
    update();
  });
  nameInput.addEventListener('input', update);
  form.addEventListener('submit', (ev) => ev.preventDefault());

  /** The rectangle between two frame points, drawn over the picture; returns it. */
  const show = (/** @type {{x:number,y:number}} */ a, /** @type {{x:number,y:number}} */ b) => {
    const r = { x: Math.min(a.x, b.x), y: Math.min(a.y, b.y), width: Math.abs(a.x - b.x), height: Math.abs(a.y - b.y) };
    const scale = c.getBoundingClientRect().width / frameW;
    rectEl.hidden = false;
    rectEl.style.left = `${r.x * scale}px`;
    rectEl.style.top = `${r.y * scale}px`;
    rectEl.style.width = `${r.width * scale}px`;
    rectEl.style.height = `${r.height * scale}px`;
    return r;
  };
}

function update() {
  if (!region) return;
  const name = nameInput.validity.valid ? nameInput.value : 'reference';
  const { x, y, width, height } = region;
  download.href = `${liveBase}/frame.png?name=${encodeURIComponent(name)}&x=${x}&y=${y}&width=${width}&height=${height}`;
  download.download = `${name}.png`;
  download.textContent = `Save ${name}.png`;
  regionText.textContent = `x=${x} y=${y} ${width}x${height}`;
  python.textContent = `wait_for_match("images/${name}.png", region=Region(x=${x}, y=${y}, width=${width}, height=${height}))`;
}
