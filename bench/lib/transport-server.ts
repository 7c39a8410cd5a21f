/**
 * One live-view transport, alone in a process (and its process group), for
 * bench/live-transport-bench.ts: a raw 1280x720 rgb24 source at 25 fps, one
 * shared encoder started by the first viewer and stopped by the last, and an
 * HTTP server with the viewers' stream and a page that plays it.
 *
 *   node --import tsx bench/lib/transport-server.ts --port P --source testsrc|still --mode M [--resend yes|no]
 *
 * Sources (both at 1280x720, 25 fps, raw rgb24, as the daemon's preview):
 * - `testsrc`: ffmpeg's testsrc2 (every frame differs), read from its stdout.
 * - `still`: made in this process: one picture with a 160x60 patch that
 *   changes once a second (the virtual box's menu with its clock).
 *
 * Modes (the encoder):
 * - `sharp80`: today's product, sharp JPEG quality 80 (optimised Huffman coding, 4:2:0).
 * - `sharp-fast`: the product's choice, sharp JPEG quality 80, `optimiseCoding: false`, 4:2:0 (LIVE_JPEG).
 * - `sharp-540`: as sharp-fast, scaled to 960x540 first.
 * - `ffmpeg-mjpeg`: a second ffmpeg fed the raw frames on stdin, `-c:v mjpeg -q:v 5 -f mpjpeg`.
 * - `x264`: a second ffmpeg fed the raw frames, libx264 ultrafast zerolatency, Annex B.
 * - `x264-tap` (testsrc only): libx264 as a second output of the source
 *   ffmpeg (what tapping the capture's own ffmpeg would cost; no pipe).
 *
 * Frames equal to the previous one are not encoded (the product's rule). With
 * `--resend no` an unchanged frame is sent to nobody (a new viewer gets the
 * last one); with `yes` (today) it is sent again to every viewer.
 *
 * Streams: `/stream` is multipart JPEG (the product's framing, plus
 * `X-Frame-Time`: Date.now() when the raw frame arrived); `/h264` is a
 * chunked body of [u32 length][f64 time][u8 key] + Annex B access unit.
 * `/page` plays either in a canvas and counts frames shown and their age.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import sharp from 'sharp';
import { LIVE_JPEG } from '../../src/web/liveStream.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const PORT = Number(arg('port', '0'));
const SOURCE = arg('source', 'testsrc');
const MODE = arg('mode', 'sharp80');
const RESEND = arg('resend', 'yes') === 'yes';
const W = 1280;
const H = 720;
const FPS = 25;
const FRAME = W * H * 3;
const H264 = MODE.startsWith('x264');

interface Out {
  data: Buffer;
  time: number;
  key: boolean;
}
interface Viewer {
  res: http.ServerResponse;
  behind: boolean;
  /** H.264: waits for a keyframe before its first access unit. */
  started: boolean;
}
const viewers = new Set<Viewer>();
/** Raw frames from the source and frames out of the encoder, for the bench's per-frame figures. */
const counts = { raw: 0, encoded: 0 };
let last: Out | undefined;
let lastRaw: Buffer | undefined;

// ------------------------------------------------------------------ sending

function write(v: Viewer, o: Out): void {
  if (v.res.writableLength > 0) {
    v.behind = true;
    return;
  }
  v.behind = false;
  if (H264) {
    if (!v.started && !o.key) return;
    v.started = true;
    const head = Buffer.alloc(13);
    head.writeUInt32BE(o.data.length, 0);
    head.writeDoubleBE(o.time, 4);
    head.writeUInt8(o.key ? 1 : 0, 12);
    v.res.cork();
    v.res.write(head);
    v.res.write(o.data);
    v.res.uncork();
    return;
  }
  v.res.cork();
  v.res.write(`--f\r\nContent-Type: image/jpeg\r\nContent-Length: ${o.data.length}\r\nX-Frame-Time: ${o.time}\r\n\r\n`);
  v.res.write(o.data);
  v.res.write('\r\n');
  v.res.uncork();
}

/** H.264: the access units since the last keyframe, so a new viewer starts at once. */
const gop: Out[] = [];
function broadcast(o: Out): void {
  counts.encoded++;
  last = o;
  if (H264) {
    if (o.key) gop.length = 0;
    gop.push(o);
  }
  for (const v of viewers) write(v, o);
}

// ------------------------------------------------------------------ encoders

/** A raw frame arrived (from the source): give it to the encoder if someone watches. */
let encoding = false;
let pending: { data: Buffer; time: number } | undefined;
function rawFrame(data: Buffer, time: number): void {
  counts.raw++;
  if (viewers.size === 0) return;
  if (lastRaw && lastRaw.equals(data)) {
    if (RESEND && last && !H264) for (const v of viewers) write(v, { ...last, time });
    return;
  }
  lastRaw = Buffer.from(data);
  if (MODE.startsWith('sharp')) {
    pending = { data: lastRaw, time };
    if (!encoding) void encodeSharp();
  } else if (encoder && MODE !== 'x264-tap') {
    if (encoder.stdin!.writableLength === 0) {
      times.push(time);
      encoder.stdin!.write(lastRaw);
    }
  }
}

async function encodeSharp(): Promise<void> {
  encoding = true;
  while (pending) {
    const { data, time } = pending;
    pending = undefined;
    let img = sharp(data, { raw: { width: W, height: H, channels: 3 } });
    if (MODE === 'sharp-540') img = img.resize(960, 540, { kernel: 'linear' });
    const jpeg = MODE === 'sharp80'
      ? await img.jpeg({ quality: 80 }).toBuffer()
      : await img.jpeg(LIVE_JPEG).toBuffer();
    if (viewers.size > 0) broadcast({ data: jpeg, time, key: true });
  }
  encoding = false;
}

/** Times of the raw frames written to the encoder, oldest first (it keeps their order). */
const times: number[] = [];
let encoder: ChildProcess | undefined;
const X264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-pix_fmt', 'yuv420p', '-g', '50', '-x264-params', 'aud=1:repeat-headers=1', '-f', 'h264'];

function startEncoder(): void {
  if (MODE.startsWith('sharp') || MODE === 'x264-tap') return;
  const codec = MODE === 'ffmpeg-mjpeg' ? ['-c:v', 'mjpeg', '-q:v', '5', '-pix_fmt', 'yuvj420p', '-f', 'mpjpeg'] : X264;
  encoder = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${W}x${H}`, '-framerate', String(FPS), '-i', 'pipe:0', ...codec, '-flush_packets', '1', 'pipe:1'], { stdio: ['pipe', 'pipe', 'inherit'] });
  encoder.stdin!.on('error', () => undefined);
  const cut = MODE === 'ffmpeg-mjpeg' ? jpegCutter() : auCutter();
  encoder.stdout!.on('data', (c: Buffer) => cut(c, (o) => viewers.size > 0 && broadcast({ ...o, time: times.shift() ?? Date.now() })));
}

function stopEncoder(): void {
  encoder?.stdin?.end();
  encoder?.kill();
  encoder = undefined;
  times.length = 0;
}

/** JPEGs out of a byte stream (SOI ... EOI; ffmpeg's mpjpeg headers in between are skipped). */
function jpegCutter(): (c: Buffer, emit: (o: { data: Buffer; key: boolean }) => void) => void {
  let buf = Buffer.alloc(0);
  return (c, emit) => {
    buf = Buffer.concat([buf, c]);
    for (;;) {
      const s = buf.indexOf(Buffer.from([0xff, 0xd8]));
      if (s < 0) return;
      const e = buf.indexOf(Buffer.from([0xff, 0xd9]), s + 2);
      if (e < 0) {
        buf = buf.subarray(s);
        return;
      }
      emit({ data: Buffer.from(buf.subarray(s, e + 2)), key: true });
      buf = buf.subarray(e + 2);
    }
  };
}

/** H.264 access units out of an Annex B stream: each starts with an AUD (aud=1). */
function auCutter(): (c: Buffer, emit: (o: { data: Buffer; key: boolean }) => void) => void {
  let buf = Buffer.alloc(0);
  const AUD = Buffer.from([0, 0, 0, 1, 9]);
  return (c, emit) => {
    buf = Buffer.concat([buf, c]);
    for (;;) {
      const s = buf.indexOf(AUD);
      if (s < 0) return;
      const e = buf.indexOf(AUD, s + 5);
      if (e < 0) {
        buf = buf.subarray(s);
        return;
      }
      const au = Buffer.from(buf.subarray(s, e));
      // An IDR slice (NAL type 5) anywhere in the unit makes it a keyframe.
      let key = false;
      for (let i = 0; i + 4 < au.length; i++) if (au[i] === 0 && au[i + 1] === 0 && au[i + 2] === 1 && (au[i + 3]! & 0x1f) === 5) key = true;
      emit({ data: au, key });
      buf = buf.subarray(e);
    }
  };
}

// ------------------------------------------------------------------ source

let tapCut: ((c: Buffer, emit: (o: { data: Buffer; key: boolean }) => void) => void) | undefined;
if (SOURCE === 'testsrc') {
  const tap = MODE === 'x264-tap' ? ['-map', '0:v', ...X264, '-flush_packets', '1', 'pipe:3'] : [];
  const src = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-re', '-f', 'lavfi', '-i', `testsrc2=size=${W}x${H}:rate=${FPS}`, '-map', '0:v', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1', ...tap], { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] });
  let buf: Buffer = Buffer.alloc(0);
  src.stdout!.on('data', (c: Buffer) => {
    buf = buf.length === 0 ? c : Buffer.concat([buf, c]);
    while (buf.length >= FRAME) {
      rawFrame(buf.subarray(0, FRAME), Date.now());
      buf = buf.subarray(FRAME);
    }
    if (buf.length > 0) buf = Buffer.from(buf); // let the big chunk go
  });
  if (MODE === 'x264-tap') {
    tapCut = auCutter();
    (src.stdio[3] as NodeJS.ReadableStream).on('data', (c: Buffer) => tapCut!(c, (o) => viewers.size > 0 && broadcast({ ...o, time: Date.now() })));
  }
} else {
  const frame = Buffer.alloc(FRAME);
  for (let i = 0; i < FRAME; i += 3) {
    const px = i / 3;
    const x = px % W;
    const y = Math.floor(px / W);
    frame[i] = (x * 255) / W;
    frame[i + 1] = (y * 255) / H;
    frame[i + 2] = x % 64 < 32 !== y % 64 < 32 ? 200 : 60;
  }
  let second = -1;
  setInterval(() => {
    const s = Math.floor(Date.now() / 1000);
    if (s !== second) {
      second = s;
      for (let y = 20; y < 80; y++) frame.fill((s * 37) % 256, (y * W + 40) * 3, (y * W + 200) * 3);
    }
    rawFrame(frame, Date.now());
  }, 1000 / FPS);
}

// ------------------------------------------------------------------ HTTP

const PAGE = `<!doctype html><meta charset=utf-8><title>transport</title><canvas id=c width=${W} height=${H}></canvas><script type=module>
const c = document.getElementById('c'); const ctx = c.getContext('2d');
window.stats = { shown: 0, ages: [] };
const shown = (t) => { window.stats.shown++; window.stats.ages.push(Date.now() - t); };
const h264 = ${H264};
const res = await fetch(h264 ? '/h264' : '/stream');
const reader = res.body.getReader();
let buf = new Uint8Array(0);
const more = async () => { const r = await reader.read(); if (r.done) throw new Error('end'); const b = new Uint8Array(buf.length + r.value.length); b.set(buf); b.set(r.value, buf.length); buf = b; };
if (h264) {
  const dec = new VideoDecoder({ output: (f) => { ctx.drawImage(f, 0, 0, c.width, c.height); const t = f.timestamp / 1000; f.close(); shown(t); }, error: (e) => console.log(String(e)) });
  dec.configure({ codec: 'avc1.42E01F', optimizeForLatency: true });
  for (;;) {
    while (buf.length < 13) await more();
    const dv = new DataView(buf.buffer, buf.byteOffset);
    const len = dv.getUint32(0), t = dv.getFloat64(4), key = buf[12] === 1;
    while (buf.length < 13 + len) await more();
    dec.decode(new EncodedVideoChunk({ type: key ? 'key' : 'delta', timestamp: t * 1000, data: buf.slice(13, 13 + len) }));
    buf = buf.slice(13 + len);
  }
} else {
  let latest = null, wake = null;
  (async () => { for (;;) { if (!latest) { await new Promise((r) => (wake = r)); continue; } const { jpeg, t } = latest; latest = null;
    const bm = await createImageBitmap(new Blob([jpeg], { type: 'image/jpeg' })); ctx.drawImage(bm, 0, 0, c.width, c.height); bm.close(); shown(t); } })();
  const dec = new TextDecoder();
  for (;;) {
    let end;
    while ((end = findHead()) < 0) await more();
    const head = dec.decode(buf.subarray(0, end));
    const len = Number(/content-length: (\\d+)/i.exec(head)[1]); const t = Number(/x-frame-time: (\\d+)/i.exec(head)[1]);
    while (buf.length < end + 4 + len) await more();
    latest = { jpeg: buf.slice(end + 4, end + 4 + len), t }; wake?.();
    buf = buf.slice(end + 4 + len);
  }
}
function findHead() { for (let i = 0; i + 3 < buf.length; i++) if (buf[i] === 13 && buf[i+1] === 10 && buf[i+2] === 13 && buf[i+3] === 10) return i; return -1; }
</script>`;

http
  .createServer((req, res) => {
    if (req.url === '/stats') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(counts));
      return;
    }
    if (req.url === '/page') {
      res.writeHead(200, { 'Content-Type': 'text/html' }).end(PAGE);
      return;
    }
    if (req.url !== '/stream' && req.url !== '/h264') {
      res.writeHead(404).end();
      return;
    }
    res.socket?.setNoDelay(true);
    res.writeHead(200, { 'Content-Type': H264 ? 'application/octet-stream' : 'multipart/x-mixed-replace; boundary=f', 'Cache-Control': 'no-store' });
    const v: Viewer = { res, behind: false, started: false };
    viewers.add(v);
    if (viewers.size === 1) startEncoder();
    else if (H264 && gop[0]?.key) {
      // The whole group of pictures at once, whatever the socket holds.
      const all = { writableLength: 0, cork: () => res.cork(), uncork: () => res.uncork(), write: (b: Buffer | string) => res.write(b) };
      for (const o of gop) write({ res: all as unknown as http.ServerResponse, behind: false, started: true }, o);
    }
    else if (last && !H264) write(v, last);
    if (H264 && gop[0]?.key) v.started = true;
    res.on('drain', () => v.behind && last && write(v, last));
    res.on('close', () => {
      viewers.delete(v);
      if (viewers.size === 0) {
        stopEncoder();
        last = lastRaw = undefined;
        gop.length = 0;
      }
    });
  })
  .listen(PORT, '127.0.0.1', () => console.log(`listening ${PORT}`));
