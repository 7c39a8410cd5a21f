// The control socket ops the stbt API adds: `next_frame` (frames() yields
// every new frame without polling) and `release` (pressing() ends a hold).
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RunControlChannel } from '../../src/core/ports.js';
import type { PressOptions } from '../../src/hardware/ir/keys.js';
import { CONTROL_SOCKET_ENV, ControlServer, type ControlFrame } from '../../src/runner/control.js';
import { waitFor } from '../helpers/wait.js';

class Client {
  private buf = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  constructor(readonly sock: Socket) {
    sock.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake?.();
    });
    sock.on('error', () => undefined);
  }
  static async open(p: string): Promise<Client> {
    const s = connect(p);
    await new Promise<void>((resolve, reject) => s.once('connect', resolve).once('error', reject));
    return new Client(s);
  }
  send(x: unknown): void {
    this.sock.write(`${JSON.stringify(x)}\n`);
  }
  async line(): Promise<Record<string, unknown>> {
    while (!this.buf.includes(0x0a)) await new Promise<void>((r) => (this.wake = r));
    const nl = this.buf.indexOf(0x0a);
    const out = JSON.parse(this.buf.subarray(0, nl).toString('utf8')) as Record<string, unknown>;
    this.buf = this.buf.subarray(nl + 1);
    return out;
  }
  async frame(): Promise<{ header: Record<string, unknown>; body: Buffer }> {
    const header = await this.line();
    const n = header.bytes as number;
    while (this.buf.length < n) await new Promise<void>((r) => (this.wake = r));
    const body = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return { header, body };
  }
  async ask(x: unknown): Promise<Record<string, unknown>> {
    this.send(x);
    return this.line();
  }
  get buffered(): number {
    return this.buf.length;
  }
}

const frameOf = (seq: number): ControlFrame => ({ data: Buffer.alloc(4 * 2 * 3, seq), width: 4, height: 2, seq, at: 1_790_000_000_000 + seq * 40 });

describe('ControlServer: next_frame and release (the stbt API)', () => {
  let tmp: string;
  let frame: ControlFrame | undefined;
  let listeners: Set<() => void>;
  let presses: { key: string; opts: PressOptions }[];
  let server: ControlServer;
  let channel: RunControlChannel;
  const clients: Client[] = [];
  const client = async () => {
    const c = await Client.open(channel.env[CONTROL_SOCKET_ENV]!);
    clients.push(c);
    return c;
  };
  const publish = (seq: number) => {
    frame = frameOf(seq);
    for (const l of listeners) l();
  };
  const open = async (withOnFrames: boolean) => {
    server = new ControlServer({
      keys: {
        press: (key, opts) => {
          presses.push({ key, opts });
          // Holds last until released (or the run ends), as a real transport's repeats do.
          if (!opts.holdMs) return Promise.resolve();
          return new Promise<void>((_, reject) => opts.signal?.addEventListener('abort', () => reject(opts.signal?.reason), { once: true }));
        },
      },
      latestFrame: () => frame && { ...frame, data: Buffer.from(frame.data) },
      ...(withOnFrames && {
        onFrames: (l: () => void) => {
          listeners.add(l);
          return () => listeners.delete(l);
        },
      }),
      tmpDir: tmp,
    });
    channel = await server.open({ resultDir: '/results/1', testPackSha: 'a'.repeat(40), remote: 'tv' });
  };

  beforeEach(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'farmhand-ctl-stbt-'));
    frame = frameOf(5);
    listeners = new Set();
    presses = [];
    await open(true);
  });
  afterEach(async () => {
    clients.splice(0).forEach((c) => c.sock.destroy());
    await server.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('next_frame without after_seq answers with the next frame captured, not the one already there', async () => {
    const c = await client();
    c.send({ id: 1, op: 'next_frame', timeout_ms: 60_000 });
    await waitFor(() => listeners.size === 2);
    expect(c.buffered).to.equal(0);
    publish(6);
    const { header, body } = await c.frame();
    expect(header).to.deep.include({ id: 1, ok: true, seq: 6, width: 4, height: 2, format: 'rgb24', bytes: 24, at: 1_790_000_000_240 });
    expect(body.equals(Buffer.alloc(24, 6))).to.equal(true);
    expect(listeners.size).to.equal(1); // only the keeper, until the reader has been idle for 2 s
  });

  it('next_frame with after_seq below the latest answers at once; at the latest it waits for the next', async () => {
    const c = await client();
    c.send({ id: 1, op: 'next_frame', after_seq: 4 });
    expect((await c.frame()).header).to.deep.include({ id: 1, seq: 5 });
    c.send({ id: 2, op: 'next_frame', after_seq: 5 });
    await waitFor(() => listeners.size === 2);
    publish(6);
    expect((await c.frame()).header).to.deep.include({ id: 2, seq: 6 });
  });

  it('a reader that falls behind gets the frames in between, up to the last 8, not only the newest', async () => {
    const c = await client();
    c.send({ id: 1, op: 'next_frame', timeout_ms: 60_000 });
    await waitFor(() => listeners.size === 2); // the keeper and the waiting request
    publish(6);
    expect((await c.frame()).header).to.deep.include({ id: 1, seq: 6 });
    // The client is busy while frames 7 to 9 arrive.
    publish(7);
    publish(8);
    publish(9);
    for (const seq of [7, 8, 9]) {
      c.send({ id: seq, op: 'next_frame', after_seq: seq - 1 });
      expect((await c.frame()).header).to.deep.include({ id: seq, seq });
    }
    // Far behind: the oldest kept frame comes next, 8 frames back from the newest.
    for (let seq = 10; seq <= 30; seq++) publish(seq);
    c.send({ id: 10, op: 'next_frame', after_seq: 9 });
    expect((await c.frame()).header).to.deep.include({ id: 10, seq: 23 });
  });

  it('next_frame answers {"none":true} when no frame came within timeout_ms', async () => {
    const c = await client();
    expect(await c.ask({ id: 1, op: 'next_frame', after_seq: 5, timeout_ms: 0 })).to.deep.equal({ id: 1, ok: true, none: true });
    c.send({ id: 2, op: 'next_frame', after_seq: 5, timeout_ms: 20 });
    expect(await c.line()).to.deep.equal({ id: 2, ok: true, none: true });
    expect(listeners.size).to.equal(1);
  });

  it('next_frame without onFrames finds the new frame by looking again', async () => {
    await server.close();
    await open(false);
    const c = await client();
    c.send({ id: 1, op: 'next_frame', after_seq: 5, timeout_ms: 60_000 });
    frame = frameOf(7);
    expect((await c.frame()).header).to.deep.include({ id: 1, seq: 7 });
  });

  it('next_frame refuses a bad after_seq or timeout_ms, and answers device_unavailable when capture is offline', async () => {
    const c = await client();
    expect(await c.ask({ id: 1, op: 'next_frame', after_seq: 'x' })).to.deep.include({ id: 1, ok: false, error: 'invalid_request' });
    expect(await c.ask({ id: 2, op: 'next_frame', timeout_ms: -1 })).to.deep.include({ id: 2, ok: false, error: 'invalid_request' });
    frame = undefined;
    expect(await c.ask({ id: 3, op: 'next_frame' })).to.deep.include({ id: 3, ok: false, error: 'device_unavailable' });
  });

  it('release ends a press held with hold_id: the press answers ok, and the log shows the release', async () => {
    const lines: string[] = [];
    channel.onEvent!((t) => lines.push(t));
    const holder = await client();
    const other = await client();
    holder.send({ id: 1, op: 'press', key: 'KEY_UP', hold_ms: 60_000, hold_id: 'h1' });
    await waitFor(() => presses.length === 1);
    expect(await other.ask({ id: 1, op: 'release', hold_id: 'h1' })).to.deep.equal({ id: 1, ok: true });
    expect(await holder.line()).to.deep.equal({ id: 1, ok: true, released: true });
    expect(presses[0]!.opts.holdMs).to.equal(60_000);
    expect(lines).to.deep.equal(['press KEY_UP (hold until released) remote=tv transport=unknown', 'release KEY_UP']);
  });

  it('a release that comes before its press makes that press a plain one', async () => {
    const c = await client();
    expect(await c.ask({ id: 1, op: 'release', hold_id: 'early' })).to.deep.equal({ id: 1, ok: true });
    expect(await c.ask({ id: 2, op: 'press', key: 'KEY_UP', hold_ms: 60_000, hold_id: 'early' })).to.deep.equal({ id: 2, ok: true });
    expect(presses[0]!.opts.holdMs).to.equal(0);
    expect(await c.ask({ id: 3, op: 'release' })).to.deep.include({ id: 3, ok: false, error: 'invalid_request' });
    expect(await c.ask({ id: 4, op: 'press', key: 'KEY_UP', hold_id: 7 })).to.deep.include({ id: 4, ok: false, error: 'invalid_request' });
  });

  it('held answers once the hold\'s key is down (pressing() starts its block then), even when asked before the press arrives', async () => {
    const holder = await client();
    const asker = await client();
    const other = await client();
    asker.send({ id: 1, op: 'held', hold_id: 'h2' }); // before its press: waits for it
    holder.send({ id: 1, op: 'press', key: 'KEY_UP', hold_ms: 60_000, hold_id: 'h2' });
    await waitFor(() => presses.length === 1);
    expect(presses[0]!.opts.untilReleased).to.equal(true);
    // The key is not down yet: a round trip on another connection, and still no answer to held.
    expect(await other.ask({ id: 1, op: 'log', text: 'x' })).to.deep.equal({ id: 1, ok: true });
    expect(asker.buffered).to.equal(0);
    presses[0]!.opts.onDown!();
    expect(await asker.line()).to.deep.equal({ id: 1, ok: true, down: true });
    expect(await other.ask({ id: 2, op: 'release', hold_id: 'h2' })).to.deep.equal({ id: 2, ok: true });
    expect(await holder.line()).to.deep.equal({ id: 1, ok: true, released: true });
  });

  it('held answers down false when the hold ended without the key going down, or never came within timeout_ms', async () => {
    const holder = await client();
    const asker = await client();
    holder.send({ id: 1, op: 'press', key: 'KEY_UP', hold_ms: 60_000, hold_id: 'h3' });
    await waitFor(() => presses.length === 1);
    asker.send({ id: 1, op: 'held', hold_id: 'h3' });
    expect(await (await client()).ask({ id: 1, op: 'release', hold_id: 'h3' })).to.deep.equal({ id: 1, ok: true });
    expect(await holder.line()).to.deep.equal({ id: 1, ok: true, released: true });
    expect(await asker.line()).to.deep.equal({ id: 1, ok: true, down: false });
    expect(await asker.ask({ id: 2, op: 'held', hold_id: 'never', timeout_ms: 0 })).to.deep.equal({ id: 2, ok: true, down: false });
    expect(await asker.ask({ id: 3, op: 'held' })).to.deep.include({ id: 3, ok: false, error: 'invalid_request' });
  });
});
