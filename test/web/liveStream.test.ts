/**
 * The live view's shared MJPEG encoder (src/web/liveStream.ts) on a real
 * HTTP server, fed by a frame source of the test's own (the LiveFrameSource
 * seam): a frame equal to the last is neither encoded nor sent again, a new
 * viewer gets the last picture at once, a changed frame reaches everyone.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import sharp from 'sharp';
import type { RawFrame } from '../../src/hardware/capture/index.js';
import { BOUNDARY, LiveStream, type LiveFrameSource } from '../../src/web/liveStream.js';
import { waitFor } from '../helpers/wait.js';

const until = (probe: () => boolean, what = 'condition') => waitFor(probe, { what, timeoutMs: 25_000 });

const W = 64;
const H = 36;

/** Frames published by the test, one at a time. */
class TestFrames implements LiveFrameSource {
  private listeners = new Set<() => void>();
  private frame: RawFrame | undefined;
  private seq = 0;
  publish(fill: number): void {
    this.frame = { data: Buffer.alloc(W * H * 3, fill), width: W, height: H, seq: ++this.seq, at: Date.now() };
    for (const l of this.listeners) l();
  }
  onFrames(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  get subscribed(): number {
    return this.listeners.size;
  }
  async withLatestFrame<T>(fn: (frame: RawFrame) => Promise<T>): Promise<T> {
    if (!this.frame) throw new Error('no frame yet');
    return fn(this.frame);
  }
}

/** A viewer: the JPEG parts it received, each with its sequence number and the picture's first pixel. */
function watch(url: string): { parts: { seq: number; red: number }[]; close: () => void } {
  const parts: { seq: number; red: number }[] = [];
  let buf = Buffer.alloc(0);
  let pending = Promise.resolve();
  const req = http.get(url, (res) => {
    res.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        const len = Number(/Content-Length: (\d+)/.exec(head)?.[1]);
        if (buf.length < end + 4 + len + 2) return;
        const jpeg = buf.subarray(end + 4, end + 4 + len);
        const seq = Number(/X-Frame-Seq: (\d+)/.exec(head)?.[1]);
        buf = buf.subarray(end + 4 + len + 2);
        pending = pending.then(async () => {
          const px = await sharp(jpeg).raw().toBuffer();
          parts.push({ seq, red: px[0]! });
        });
      }
    });
  });
  req.on('error', () => undefined);
  return { parts, close: () => req.destroy() };
}

describe('live view: the shared MJPEG stream', function () {
  this.timeout(30_000);
  let server: http.Server;
  let url: string;
  let frames: TestFrames;
  let stream: LiveStream;

  beforeEach(async () => {
    frames = new TestFrames();
    stream = new LiveStream(frames, { maxViewers: 4 });
    server = http.createServer((_req, res) => stream.add(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('multipart JPEG parts, each with a Content-Length and a sequence number', async () => {
    frames.publish(200);
    const res = await new Promise<http.IncomingMessage>((r) => http.get(url, r));
    expect(res.headers['content-type']).to.equal(`multipart/x-mixed-replace; boundary=${BOUNDARY}`);
    res.destroy();
  });

  it('an unchanged frame is neither encoded nor sent again; a changed one reaches every viewer', async () => {
    frames.publish(200);
    const a = watch(url);
    await until(() => a.parts.length === 1, 'the first picture at once');
    for (let i = 1; i <= 5; i++) {
      frames.publish(200); // the same picture again
      await until(() => stream.stats.unchanged === i, 'the equal frame seen');
    }
    expect(a.parts).to.have.length(1);
    const b = watch(url);
    await until(() => b.parts.length === 1, 'a new viewer gets the last picture at once');
    expect(b.parts[0]!.seq).to.equal(6); // the newest frame's number, though encoded from frame 1
    frames.publish(40);
    await until(() => a.parts.length === 2 && b.parts.length === 2, 'the changed picture to both');
    expect(a.parts.map((p) => p.seq)).to.deep.equal([1, 7]);
    expect(Math.abs(a.parts[1]!.red - 40)).to.be.below(4);
    expect(stream.stats.encoded).to.equal(2);
    a.close();
    b.close();
  });

  it('a source that makes the live JPEGs itself (capture.live_width): its bytes are sent as they are, never encoded; equal bytes are not sent again', async () => {
    // ffmpeg's MJPEG output (the shipped configuration): the live view only passes the pictures on.
    const jpegOf = (fill: number) => sharp(Buffer.alloc((W / 2) * (H / 2) * 3, fill), { raw: { width: W / 2, height: H / 2, channels: 3 } }).jpeg({ quality: 50 }).toBuffer();
    const pictures = [await jpegOf(90), await jpegOf(90), await jpegOf(30)];
    let current = { jpeg: pictures[0]!, seq: 1 };
    const withJpeg = Object.assign(new TestFrames(), { liveIsJpeg: true, latestLiveJpeg: () => current });
    const s2 = new LiveStream(withJpeg, { maxViewers: 4 });
    const server2 = http.createServer((_req, res) => s2.add(res));
    await new Promise<void>((r) => server2.listen(0, '127.0.0.1', r));
    try {
      withJpeg.publish(200); // a full-size raw frame too: it must not be what the viewer gets
      const got: Buffer[] = [];
      let buf = Buffer.alloc(0);
      const req = http.get(`http://127.0.0.1:${(server2.address() as AddressInfo).port}/`, (res) => {
        res.on('data', (c: Buffer) => {
          buf = Buffer.concat([buf, c]);
          for (;;) {
            const end = buf.indexOf('\r\n\r\n');
            const len = Number(/Content-Length: (\d+)/.exec(buf.subarray(0, Math.max(0, end)).toString())?.[1]);
            if (end < 0 || buf.length < end + 4 + len + 2) return;
            got.push(buf.subarray(end + 4, end + 4 + len));
            buf = buf.subarray(end + 4 + len + 2);
          }
        });
      });
      await waitFor(() => got.length === 1, { what: 'the first picture', timeoutMs: 25_000 });
      expect(got[0]!.equals(pictures[0]!)).to.equal(true);
      // The same bytes again under a new number (a still picture): not sent.
      current = { jpeg: pictures[1]!, seq: 2 };
      withJpeg.publish(200);
      await waitFor(() => s2.stats.unchanged === 1, { what: 'the equal picture seen', timeoutMs: 25_000 });
      current = { jpeg: pictures[2]!, seq: 3 };
      withJpeg.publish(200);
      await waitFor(() => got.length === 2, { what: 'the changed picture', timeoutMs: 25_000 });
      req.destroy();
      expect(got[1]!.equals(pictures[2]!)).to.equal(true);
      expect(s2.stats).to.include({ encoded: 0, passed: 2, unchanged: 1 });
    } finally {
      server2.closeAllConnections();
      await new Promise((r) => server2.close(r));
    }
  });

  it('the last viewer leaving unsubscribes from the frames', async () => {
    frames.publish(1);
    const a = watch(url);
    await until(() => a.parts.length === 1, 'the first picture');
    expect(frames.subscribed).to.equal(1);
    a.close();
    await until(() => frames.subscribed === 0, 'unsubscribed');
  });
});
