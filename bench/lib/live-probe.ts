/**
 * Preloaded into a benchmarked daemon by bench/live-view-stages.ts (`node
 * --import tsx --import <this file> src/main.ts ...`): wraps, from outside,
 * the methods one key press and its picture pass through, and appends one
 * JSON line per stage to $FARMHAND_LIVE_PROBE_FILE with a high-resolution
 * wall time (`performance.timeOrigin + performance.now()`, comparable with
 * the same figure in the browser on this machine). Nothing in src/ knows of
 * it; the modules are the daemon's own instances (same URLs under tsx).
 */
import { appendFileSync } from 'node:fs';
import sharp from 'sharp';
import { NodePolicy } from '../../src/core/nodePolicy.js';
import { FfmpegFrameSource } from '../../src/hardware/capture/ffmpeg-frame-source.js';
import { KeyPresser } from '../../src/hardware/ir/keys.js';
import { FrameCache } from '../../src/hardware/virtual/frames.js';
import { VirtualTransport } from '../../src/hardware/ir/transports/virtual.js';
import { GitTestPack } from '../../src/runner/gitTestPack.js';
import { LiveStream } from '../../src/web/liveStream.js';

const file = process.env.FARMHAND_LIVE_PROBE_FILE;
const now = (): number => performance.timeOrigin + performance.now();
const note = (stage: string, extra: Record<string, unknown> = {}): void => {
  if (file) appendFileSync(file, `${JSON.stringify({ stage, t: now(), ...extra })}\n`);
};

type AnyFn = (...args: unknown[]) => unknown;
/** Note `<name>.start` and `<name>.end` around an async method. */
function timeAsync(proto: object, method: string, name: string): void {
  const p = proto as Record<string, AnyFn>;
  const orig = p[method]!;
  p[method] = async function (this: unknown, ...args: unknown[]) {
    note(`${name}.start`);
    try {
      return await orig.apply(this, args);
    } finally {
      note(`${name}.end`);
    }
  };
}

if (file) {
  timeAsync(NodePolicy.prototype, 'press', 'policy.press');
  timeAsync(GitTestPack.prototype, 'resolve', 'testPack.resolve');
  timeAsync(GitTestPack.prototype, 'fetch', 'testPack.fetch');
  timeAsync(GitTestPack.prototype, 'remoteControls', 'testPack.remoteControls');
  timeAsync(GitTestPack.prototype, 'config', 'testPack.config');
  timeAsync(KeyPresser.prototype, 'press', 'keys.press');
  timeAsync(VirtualTransport.prototype, 'send', 'ir.send');

  // Renders of the virtual box (raw output) vs. JPEG encodes of the live view.
  const proto = (sharp as unknown as { prototype: Record<string, AnyFn> }).prototype;
  const toBuffer = proto.toBuffer!;
  proto.toBuffer = async function (this: { options?: { formatOut?: string } }, ...args: unknown[]) {
    const kind = this.options?.formatOut === 'jpeg' ? 'jpeg' : this.options?.formatOut === 'raw' ? 'render' : 'other';
    if (kind === 'render') note('render.start');
    try {
      return await toBuffer.apply(this, args);
    } finally {
      if (kind === 'render') note('render.end');
    }
  };

  // A new picture of the box is ready (rendered, or put together from kept layers without a render).
  const fc = FrameCache.prototype as unknown as Record<string, AnyFn | undefined>;
  const publish = fc.publish;
  if (publish) {
    fc.publish = function (this: unknown, ...args: unknown[]) {
      note('frame.ready');
      return publish.apply(this, args);
    };
  }

  // New pictures into ffmpeg (the box's cache hands out one Buffer per rendered picture) and out again.
  let lastWritten: Buffer | undefined;
  let pending: Buffer | undefined;
  const fs = FfmpegFrameSource.prototype as unknown as Record<string, AnyFn>;
  const spawnChild = fs.spawnChild!;
  fs.spawnChild = function (this: { child?: { stdin?: NodeJS.WritableStream } }, ...args: unknown[]) {
    const r = spawnChild.apply(this, args);
    const stdin = this.child?.stdin as unknown as { write: AnyFn } | undefined;
    note('probe.spawn', { stdin: stdin !== undefined });
    if (stdin) {
      const write: AnyFn = stdin.write.bind(stdin);
      stdin.write = (chunk: unknown, ...rest: unknown[]) => {
        if (Buffer.isBuffer(chunk) && chunk !== lastWritten) {
          if (lastWritten !== undefined) {
            pending = chunk;
            note('ffmpeg.in');
          }
          lastWritten = chunk;
        }
        return write(chunk, ...rest);
      };
    }
    return r;
  };
  const onData = fs.onData!;
  fs.onData = function (this: { ring: { latestData(): Buffer | undefined; published?: { seq: number } } }, ...args: unknown[]) {
    const r = onData.apply(this, args);
    const data = this.ring.latestData();
    if (pending && data?.equals(pending)) {
      note('ffmpeg.out', { seq: this.ring.published?.seq });
      pending = undefined;
    }
    return r;
  };

  const ls = LiveStream.prototype as unknown as Record<string, AnyFn>;
  const encodeLatest = ls.encodeLatest!;
  ls.encodeLatest = async function (this: unknown, ...args: unknown[]) {
    const t0 = now();
    const out = (await encodeLatest.apply(this, args)) as { seq: number; jpeg: Buffer } | undefined;
    if (out) note('jpeg', { seq: out.seq, start: t0, bytes: out.jpeg.length });
    return out;
  };
  const send = ls.send!;
  ls.send = function (this: unknown, viewer: unknown, frame: unknown) {
    note('send', { seq: (frame as { seq: number }).seq });
    return send.call(this, viewer, frame);
  };
}
