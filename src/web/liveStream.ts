/**
 * The live view's video: the capture's preview frames as Motion JPEG, sent
 * as `multipart/x-mixed-replace` (docs/portal.md, "Live view and web remote").
 *
 * When the capture makes the live view's JPEGs itself (`capture.live_width`,
 * the shipped configuration: ffmpeg's MJPEG output on a pipe of its own), the
 * live view only passes ffmpeg's bytes on. Otherwise (`live_width: 0`) one
 * shared encoder encodes each new frame once (sharp, libjpeg-turbo, settings
 * chosen by bench/live-transport-bench.ts: see LIVE_JPEG) while at least one
 * viewer watches. Either way the same JPEG goes to every viewer, and a frame
 * equal to the last one (a still picture, the common case on a set-top box
 * menu: the same raw frame, or the same JPEG bytes, ffmpeg's encoder being
 * deterministic) is not sent again: the viewers already show it. A new viewer gets the last JPEG at once. With no viewer the
 * encoder is not subscribed to frames at all.
 *
 * Slow viewers never hold anyone up: a frame is written to a viewer only when
 * its previous one has left Node's buffer; otherwise that viewer skips it and
 * gets the newest frame when its socket drains. Nothing queues per viewer
 * beyond one frame.
 */
import type { ServerResponse } from 'node:http';
import { loadSharp } from '../hardware/sharp.js';
import type { Logger } from '../core/ports.js';
import type { RawFrame } from '../hardware/capture/index.js';

/** What the live view needs of the capture (FfmpegFrameSource has it). */
export interface LiveFrameSource {
  onFrames(listener: () => void): () => void;
  withLatestFrame<T>(fn: (frame: RawFrame) => Promise<T>): Promise<T>;
  /** The live view's own frame when the capture makes one (smaller: `capture.live_width`); else `withLatestFrame`. */
  /** True when the capture makes the live view's JPEGs itself (`capture.live_width`): `latestLiveJpeg` has them. */
  readonly liveIsJpeg?: boolean;
  /** The capture's latest live JPEG and its number; throws when there is none (offline). */
  latestLiveJpeg?(): { jpeg: Buffer; seq: number };
}

export const isLiveFrameSource = (x: unknown): x is LiveFrameSource =>
  typeof (x as Partial<LiveFrameSource>).onFrames === 'function' && typeof (x as Partial<LiveFrameSource>).withLatestFrame === 'function';

export const BOUNDARY = 'farmhandframe';

/**
 * The live JPEG's settings (docs/portal.md, "Why MJPEG"): sharp's default
 * optimises the Huffman tables, a second pass over the picture that costs
 * two thirds of the encode for ~13 % fewer bytes; without it a 720p frame
 * takes a third of the CPU (bench/live-transport-bench.ts). Same quality,
 * 4:2:0 chroma (sharp's default, said here so it stays). The exact pixels
 * for reference images come from `/app/live/frame.png`, never the stream.
 */
export const LIVE_JPEG = { quality: 80, optimiseCoding: false, chromaSubsampling: '4:2:0' } as const;

export interface LiveStreamOptions {
  /** JPEG quality, 1-100 (default LIVE_JPEG.quality). */
  quality?: number;
  /** Viewers at once; more get a 503. */
  maxViewers: number;
  logger?: Logger;
}

interface Encoded {
  jpeg: Buffer;
  seq: number;
}

interface Viewer {
  res: ServerResponse;
  /** A frame was skipped while this viewer's socket was full: send the newest on drain. */
  behind: boolean;
}

export class LiveStream {
  private readonly viewers = new Set<Viewer>();
  private unsubscribe: (() => void) | undefined;
  private encoding = false;
  private again = false;
  /** The raw frame the last JPEG was made of (compared with each new frame) and that JPEG. */
  private lastRaw: Buffer | undefined;
  private last: Encoded | undefined;
  /** Counters for tests, the benchmark and the docs (`unchanged`: frames equal to the last, neither encoded nor sent). */
  readonly stats = { encoded: 0, passed: 0, unchanged: 0, sent: 0, skipped: 0 };

  constructor(
    private readonly source: LiveFrameSource,
    private readonly o: LiveStreamOptions,
  ) {}

  get viewerCount(): number {
    return this.viewers.size;
  }

  get full(): boolean {
    return this.viewers.size >= this.o.maxViewers;
  }

  /** Stream frames to `res` until it closes. */
  add(res: ServerResponse): void {
    res.socket?.setTimeout(0);
    res.socket?.setNoDelay(true);
    res.writeHead(200, {
      'Content-Type': `multipart/x-mixed-replace; boundary=${BOUNDARY}`,
      'Cache-Control': 'no-store, no-transform',
      'X-Accel-Buffering': 'no',
      'X-Content-Type-Options': 'nosniff',
    });
    const viewer: Viewer = { res, behind: false };
    this.viewers.add(viewer);
    res.on('drain', () => {
      if (viewer.behind && this.last) this.send(viewer, this.last);
    });
    res.on('close', () => this.remove(viewer));
    if (this.unsubscribe === undefined) {
      this.unsubscribe = this.source.onFrames(() => this.frameArrived());
    }
    // The picture at once, not at the next frame (a still box at a low preview rate).
    if (this.last) this.send(viewer, this.last);
    else this.frameArrived();
  }

  private remove(viewer: Viewer): void {
    if (!this.viewers.delete(viewer)) return;
    if (this.viewers.size > 0) return;
    // The last viewer left: stop encoding and let the cached frame go.
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.last = this.lastRaw = undefined;
  }

  private frameArrived(): void {
    if (this.encoding) {
      this.again = true; // encode the newest once this one is done; frames in between are skipped
      return;
    }
    this.encoding = true;
    this.encodeLatest()
      .then((frame) => {
        if (frame && this.viewers.size > 0) {
          this.last = frame;
          for (const v of this.viewers) this.send(v, frame);
        }
      })
      .catch((err: unknown) => this.o.logger?.debug({ err }, 'live view: no frame to encode'))
      .finally(() => {
        this.encoding = false;
        if (this.again && this.viewers.size > 0) {
          this.again = false;
          this.frameArrived();
        }
      });
  }

  private async encodeLatest(): Promise<Encoded | undefined> {
    if (this.source.liveIsJpeg && this.source.latestLiveJpeg) return this.passLatest(this.source.latestLiveJpeg());
    return this.source.withLatestFrame(async (f) => {
      if (this.last && this.last.seq === f.seq) return undefined;
      if (this.last && this.lastRaw?.length === f.data.length && this.lastRaw.equals(f.data)) {
        // The viewers show this picture already (a new viewer got it on arrival): nothing to send.
        this.last.seq = f.seq;
        this.stats.unchanged++;
        return undefined;
      }
      const sharp = await loadSharp();
      const jpeg = await sharp(f.data, { raw: { width: f.width, height: f.height, channels: 3 } })
        .jpeg({ ...LIVE_JPEG, quality: this.o.quality ?? LIVE_JPEG.quality })
        .toBuffer();
      // Still leased: the ring does not overwrite the frame until this function settles.
      if (this.lastRaw?.length !== f.data.length) this.lastRaw = Buffer.allocUnsafe(f.data.length);
      f.data.copy(this.lastRaw);
      this.stats.encoded++;
      return { jpeg, seq: f.seq };
    });
  }

  /** ffmpeg's JPEG as it is (`passed`), unless it is the one the viewers show (`unchanged`). */
  private passLatest(j: { jpeg: Buffer; seq: number }): Encoded | undefined {
    if (this.last && this.last.seq === j.seq) return undefined;
    if (this.last && this.last.jpeg.equals(j.jpeg)) {
      this.last.seq = j.seq;
      this.stats.unchanged++;
      return undefined;
    }
    this.stats.passed++;
    return { jpeg: j.jpeg, seq: j.seq };
  }

  private send(viewer: Viewer, frame: Encoded): void {
    const res = viewer.res;
    if (res.destroyed || res.writableEnded) return;
    if (res.writableLength > 0) {
      // The previous frame has not left yet: skip this one for this viewer only.
      viewer.behind = true;
      this.stats.skipped++;
      return;
    }
    viewer.behind = false;
    res.cork();
    res.write(`--${BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: ${frame.jpeg.length}\r\nX-Frame-Seq: ${frame.seq}\r\n\r\n`);
    res.write(frame.jpeg);
    res.write('\r\n');
    res.uncork();
    this.stats.sent++;
  }
}
