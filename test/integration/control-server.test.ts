// The run's control socket at the byte level: a real Unix socket in a
// temporary folder, driven by raw Node clients that behave well and badly.
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FarmError } from '../../src/core/errors.js';
import type { RunControlChannel } from '../../src/core/ports.js';
import type { PressOptions } from '../../src/hardware/ir/keys.js';
import { CONTROL_SOCKET_ENV, ControlServer, MAX_REQUEST_BYTES, type ControlFrame } from '../../src/runner/control.js';
import { noisePixels } from '../helpers/noise.js';
import { waitFor } from '../helpers/wait.js';

/** A client that reads the answer stream as lines and byte counts. */
class RawClient {
  private buf = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  closed = false;
  constructor(readonly sock: Socket) {
    sock.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake?.();
    });
    sock.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
    sock.on('error', () => undefined);
  }
  static async open(p: string): Promise<RawClient> {
    const s = connect(p);
    await new Promise<void>((resolve, reject) => s.once('connect', resolve).once('error', reject));
    return new RawClient(s);
  }
  send(x: unknown): void {
    this.sock.write(typeof x === 'string' || Buffer.isBuffer(x) ? x : `${JSON.stringify(x)}\n`);
  }
  /** Wait for data or the close, whichever comes; a hang is mocha's timeout. */
  private async until(ready: () => boolean): Promise<void> {
    while (!ready()) {
      if (this.closed) throw new Error('connection closed');
      await new Promise<void>((r) => (this.wake = r));
    }
  }
  async line(): Promise<Record<string, unknown>> {
    await this.until(() => this.buf.includes(0x0a));
    const nl = this.buf.indexOf(0x0a);
    const text = this.buf.subarray(0, nl).toString('utf8');
    this.buf = this.buf.subarray(nl + 1);
    return JSON.parse(text) as Record<string, unknown>;
  }
  async bytes(n: number): Promise<Buffer> {
    await this.until(() => this.buf.length >= n);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }
  async ask(x: unknown): Promise<Record<string, unknown>> {
    this.send(x);
    return this.line();
  }
  async waitClosed(): Promise<void> {
    await this.until(() => this.closed);
  }
  end(): void {
    this.sock.destroy();
  }
}

function noiseFrame(width: number, height: number, seed: number, seq = 1): ControlFrame {
  return { data: noisePixels(width, height, seed), width, height, seq, at: 1_790_000_000_000 };
}

describe('ControlServer: the control socket protocol', () => {
  let tmp: string;
  let presses: { key: string; opts: PressOptions }[];
  let pressImpl: (key: string, opts: PressOptions) => Promise<void>;
  let frame: ControlFrame | undefined;
  let frameCalls: number;
  let server: ControlServer;
  let channel: RunControlChannel;
  let sockPath: string;
  const clients: RawClient[] = [];
  const client = async () => {
    const c = await RawClient.open(sockPath);
    clients.push(c);
    return c;
  };

  beforeEach(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'farmhand-ctl-test-'));
    presses = [];
    pressImpl = async () => undefined;
    frame = noiseFrame(64, 36, 7);
    frameCalls = 0;
    server = new ControlServer({
      keys: { press: (key, opts) => (presses.push({ key, opts }), pressImpl(key, opts)) },
      latestFrame: () => (frameCalls++, frame && { ...frame, data: Buffer.from(frame.data) }),
      tmpDir: tmp,
    });
    channel = await server.open({ resultDir: '/results/1', testPackSha: 'a'.repeat(40), remote: 'tv' });
    sockPath = channel.env[CONTROL_SOCKET_ENV]!;
  });
  afterEach(async () => {
    clients.splice(0).forEach((c) => c.end());
    await server.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('opens a socket in a private folder (0700, socket 0600) and names it in FARMHAND_CONTROL_SOCKET', async () => {
    expect(Object.keys(channel.env)).to.deep.equal(['FARMHAND_CONTROL_SOCKET']);
    expect(path.dirname(path.dirname(sockPath))).to.equal(tmp);
    expect((await stat(path.dirname(sockPath))).mode & 0o777).to.equal(0o700);
    const s = await stat(sockPath);
    expect(s.isSocket()).to.equal(true);
    expect(s.mode & 0o777).to.equal(0o600);
  });

  it('press: {"id":1,"op":"press","key":"KEY_OK","hold_ms":0} -> {"id":1,"ok":true} with the run\'s remote and commit', async () => {
    const c = await client();
    expect(await c.ask({ id: 1, op: 'press', key: 'KEY_OK', hold_ms: 0 })).to.deep.equal({ id: 1, ok: true });
    expect(await c.ask({ id: 'two', op: 'press', key: 'KEY_UP', hold_ms: 250 })).to.deep.equal({ id: 'two', ok: true });
    expect(presses.map((p) => [p.key, p.opts.remote, p.opts.testPackSha, p.opts.holdMs])).to.deep.equal([
      ['KEY_OK', 'tv', 'a'.repeat(40), 0],
      ['KEY_UP', 'tv', 'a'.repeat(40), 250],
    ]);
    expect(presses[0]!.opts.signal).to.be.instanceOf(AbortSignal);
  });

  it('press errors carry the FarmError code; other errors are "internal" with no details', async () => {
    const c = await client();
    pressImpl = async () => {
      throw new FarmError('not_found', 'remote "tv" has no key "KEY_X"');
    };
    expect(await c.ask({ id: 1, op: 'press', key: 'KEY_X' })).to.deep.equal({ id: 1, ok: false, error: 'not_found', message: 'remote "tv" has no key "KEY_X"' });
    pressImpl = async () => {
      throw new TypeError('secret internals');
    };
    const a = await c.ask({ id: 2, op: 'press', key: 'KEY_OK' });
    expect(a).to.include({ id: 2, ok: false, error: 'internal' });
    expect(a.message).to.not.include('secret');
  });

  it('the run log: a line as each press starts (key, hold, remote, transport), one more when it fails; {"op":"log"} lines as they come', async () => {
    const lines: string[] = [];
    channel.onEvent?.((t) => lines.push(t));
    const c = await client();
    pressImpl = async () => {
      expect(lines).to.have.length(1); // logged before the IR goes out
    };
    expect(await c.ask({ id: 1, op: 'press', key: 'KEY_OK', hold_ms: 0 })).to.deep.equal({ id: 1, ok: true });
    pressImpl = async () => undefined;
    await c.ask({ id: 2, op: 'press', key: 'KEY_UP', hold_ms: 250 });
    pressImpl = async () => {
      throw new FarmError('not_found', 'remote "tv" has no key "KEY_X"');
    };
    await c.ask({ id: 3, op: 'press', key: 'KEY_X' });
    expect(await c.ask({ id: 4, op: 'log', text: 'match images/ok.png: matched (confidence 0.990)' })).to.deep.equal({ id: 4, ok: true });
    expect(await c.ask({ id: 5, op: 'log', text: 42 })).to.include({ id: 5, ok: false, error: 'invalid_request' });
    channel.onEvent?.(undefined);
    await c.ask({ id: 6, op: 'log', text: 'after the run: nowhere' });
    expect(lines).to.deep.equal([
      'press KEY_OK remote=tv transport=unknown',
      'press KEY_UP (hold 250 ms) remote=tv transport=unknown',
      'press KEY_X remote=tv transport=unknown',
      'press KEY_X remote=tv transport=unknown: failed: not_found: remote "tv" has no key "KEY_X"',
      'match images/ok.png: matched (confidence 0.990)',
    ]);
  });

  it('get_frame: a JSON header then exactly the frame\'s rgb24 bytes; pipelined requests are answered in order', async () => {
    const c = await client();
    c.send(`${JSON.stringify({ id: 1, op: 'get_frame' })}\n${JSON.stringify({ id: 2, op: 'press', key: 'KEY_OK' })}\n${JSON.stringify({ id: 3, op: 'get_frame' })}\n`);
    const h = await c.line();
    expect(h).to.deep.equal({ id: 1, ok: true, width: 64, height: 36, format: 'rgb24', bytes: 64 * 36 * 3, seq: 1, at: 1_790_000_000_000 });
    expect((await c.bytes(64 * 36 * 3)).equals(frame!.data)).to.equal(true);
    expect(await c.line()).to.deep.equal({ id: 2, ok: true });
    expect(await c.line()).to.include({ id: 3, ok: true, bytes: 64 * 36 * 3 });
    expect((await c.bytes(64 * 36 * 3)).equals(frame!.data)).to.equal(true);
  });

  it('get_frame while capture is offline -> device_unavailable', async () => {
    frame = undefined;
    const c = await client();
    expect(await c.ask({ id: 9, op: 'get_frame' })).to.include({ id: 9, ok: false, error: 'device_unavailable' });
  });

  it('a malformed request gets an error answer and the connection goes on', async () => {
    const c = await client();
    const bad = ['{not json', '[1,2]', '"text"', 'null', '{"id":3}', '{"id":4,"op":"reboot"}', '{"id":5,"op":"press"}', '{"id":6,"op":"press","key":"KEY_OK","hold_ms":"5"}'];
    for (const line of bad) {
      const a = await c.ask(`${line}\n`);
      expect(a, line).to.include({ ok: false, error: 'invalid_request' });
    }
    expect(presses).to.have.length(0);
    expect(await c.ask({ id: 7, op: 'press', key: 'KEY_OK' })).to.deep.equal({ id: 7, ok: true });
  });

  it(`a request line over ${MAX_REQUEST_BYTES} bytes (or garbage with no newline) is refused and that connection closed; others go on`, async () => {
    const c = await client();
    c.send(Buffer.alloc(MAX_REQUEST_BYTES + 10, 0xfe));
    expect(await c.line()).to.include({ ok: false, error: 'invalid_request' });
    await c.waitClosed();
    expect(c.closed).to.equal(true);
    const d = await client();
    expect(await d.ask({ id: 1, op: 'press', key: 'KEY_OK' })).to.deep.equal({ id: 1, ok: true });
  });

  it('clients that disconnect in the middle of a frame do not hurt the daemon', async () => {
    frame = noiseFrame(1280, 720, 3);
    for (let i = 0; i < 5; i++) {
      const c = await client();
      c.send({ id: 1, op: 'get_frame' });
      await c.line();
      await c.bytes(1000);
      c.end();
    }
    const d = await client();
    const h = await d.ask({ id: 2, op: 'get_frame' });
    expect(h).to.include({ ok: true, bytes: 1280 * 720 * 3 });
    expect((await d.bytes(1280 * 720 * 3)).equals(frame.data)).to.equal(true);
  });

  it('a client that asks for frames but never reads stalls only itself (the server waits for it to drain)', async () => {
    frame = noiseFrame(1280, 720, 5);
    const greedy = await client();
    greedy.sock.pause();
    for (let i = 0; i < 50; i++) greedy.send({ id: i, op: 'get_frame' });
    // Instead of a sleep, a tick at the same pace: another client fetches 5 whole frames meanwhile.
    // A server that did not wait for the greedy client to drain would have served it many more.
    const other = await client();
    for (let i = 0; i < 5; i++) {
      expect(await other.ask({ id: 100 + i, op: 'get_frame' })).to.include({ ok: true, bytes: 1280 * 720 * 3 });
      await other.bytes(1280 * 720 * 3);
    }
    expect(frameCalls - 5, 'frames taken for the stalled client').to.be.at.most(3);
    expect(await other.ask({ id: 1, op: 'press', key: 'KEY_OK' })).to.deep.equal({ id: 1, ok: true });
  });

  it('a run without a remote control answers press with invalid_request', async () => {
    const ch = await server.open({ resultDir: '/results/2', testPackSha: 'b'.repeat(40), remote: null });
    const c = await RawClient.open(ch.env[CONTROL_SOCKET_ENV]!);
    clients.push(c);
    expect(await c.ask({ id: 1, op: 'press', key: 'KEY_OK' })).to.include({ ok: false, error: 'invalid_request' });
    await ch.close();
  });

  it('close() cuts connections, aborts pending presses, removes the folder; it can be called twice', async () => {
    let pendingSignal: AbortSignal | undefined;
    pressImpl = (_k, opts) =>
      new Promise((_resolve, reject) => {
        pendingSignal = opts.signal;
        opts.signal?.addEventListener('abort', () => reject(opts.signal?.reason as Error));
      });
    const c = await client();
    c.send({ id: 1, op: 'press', key: 'KEY_OK', hold_ms: 5000 });
    const signal = await waitFor(() => pendingSignal, 'the press to start');
    await channel.close();
    await channel.close();
    expect(signal.aborted).to.equal(true);
    await c.waitClosed();
    expect(c.closed).to.equal(true);
    expect(existsSync(path.dirname(sockPath))).to.equal(false);
    let err: NodeJS.ErrnoException | undefined;
    await RawClient.open(sockPath).catch((e: NodeJS.ErrnoException) => (err = e));
    expect(err?.code).to.equal('ENOENT');
  });

  it('ControlServer.close() closes every open channel', async () => {
    const other = await server.open({ resultDir: '/results/3', testPackSha: 'c'.repeat(40), remote: 'tv' });
    await server.close();
    expect(existsSync(path.dirname(sockPath))).to.equal(false);
    expect(existsSync(path.dirname(other.env[CONTROL_SOCKET_ENV]!))).to.equal(false);
  });
});
