// lircd's reply format ("BEGIN / <cmd> / SUCCESS|ERROR / [DATA / n / lines] / END")
// and LircdTransport against a scripted unix-socket server. The real lircd
// is in test/integration/ir-lircd.test.ts.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LircdReplyParser, LircdTransport } from '../../src/hardware/ir/transports/lircd.js';
import { rejection } from '../helpers/rejections.js';


describe('LircdReplyParser', () => {
  it('reads SUCCESS with no data, even split across chunks', () => {
    const p = new LircdReplyParser('SEND_ONCE tv KEY_OK');
    p.push('BEGIN\nSEND_ONCE tv KE');
    expect(p.reply).to.equal(undefined);
    p.push('Y_OK\nSUCCESS\nEN');
    expect(p.reply).to.equal(undefined);
    p.push('D\n');
    expect(p.reply).to.deep.equal({ success: true, data: [] });
  });

  it('reads ERROR with its DATA lines', () => {
    const p = new LircdReplyParser('SEND_ONCE tv NOPE');
    p.push('BEGIN\nSEND_ONCE tv NOPE\nERROR\nDATA\n1\nunknown command: "NOPE"\nEND\n');
    expect(p.reply).to.deep.equal({ success: false, data: ['unknown command: "NOPE"'] });
  });

  it('skips button events and SIGHUP broadcasts before the reply', () => {
    const p = new LircdReplyParser('VERSION');
    p.push('0000000000f40bf0 00 KEY_UP tv\nBEGIN\nSIGHUP\nEND\nBEGIN\nVERSION\nSUCCESS\nDATA\n1\n0.10.1\nEND\n');
    expect(p.reply).to.deep.equal({ success: true, data: ['0.10.1'] });
  });
});

describe('LircdTransport (scripted socket)', () => {
  let dir: string;
  let server: Server | undefined;
  const got: string[] = [];
  const sockets = new Set<Socket>();

  /** A server that answers each command line with `answer(line)` (or not at all). */
  async function serve(answer: (line: string) => string | undefined): Promise<string> {
    const path = join(dir, 'lircd.sock');
    server = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.setEncoding('utf8');
      s.on('data', (text: string) => {
        for (const line of text.split('\n').filter(Boolean)) {
          got.push(line);
          const a = answer(line);
          if (a !== undefined) s.write(a);
        }
      });
    });
    await new Promise<void>((r) => server!.listen(path, r));
    return path;
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-lircd-unit-'));
    got.length = 0;
  });
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it('writes "SEND_ONCE remote key [repeats]" and resolves on SUCCESS', async () => {
    const path = await serve((l) => `BEGIN\nSIGHUP\nEND\nBEGIN\n${l}\nSUCCESS\nEND\n`);
    const t = new LircdTransport(path);
    await t.sendKey('tv', 'KEY_OK');
    await t.sendKey('tv', 'KEY_UP', { repeats: 3 });
    await t.close();
    expect(got).to.deep.equal(['SEND_ONCE tv KEY_OK', 'SEND_ONCE tv KEY_UP 3']);
  });

  it('an unknown key is invalid_request carrying lircd\'s message', async () => {
    const path = await serve((l) => `BEGIN\n${l}\nERROR\nDATA\n1\nunknown command: "NOPE"\nEND\n`);
    const t = new LircdTransport(path);
    const e = await rejection(t.sendKey('tv', 'NOPE'));
    await t.close();
    expect(e).to.include({ code: 'invalid_request' });
    expect((e as Error).message).to.contain('unknown command: "NOPE"');
  });

  it('other lircd errors are device_unavailable', async () => {
    const path = await serve((l) => `BEGIN\n${l}\nERROR\nDATA\n1\nhardware does not support sending\nEND\n`);
    const t = new LircdTransport(path);
    expect(await rejection(t.sendKey('tv', 'KEY_OK'))).to.include({ code: 'device_unavailable' });
    await t.close();
  });

  it('names with spaces or newlines never reach the socket', async () => {
    const path = await serve(() => undefined);
    const t = new LircdTransport(path);
    expect(await rejection(t.sendKey('tv', 'KEY_OK\nSEND_ONCE tv KEY_POWER'))).to.include({ code: 'invalid_request' });
    expect(await rejection(t.sendKey('tv', 'KEY_OK', { repeats: -1 }))).to.include({ code: 'invalid_request' });
    await t.close();
    expect(got).to.deep.equal([]);
  });

  it('a lircd that does not answer is device_unavailable after the timeout', async () => {
    const path = await serve(() => undefined);
    const t = new LircdTransport(path, { timeoutMs: 100 });
    // A timeout that did not fire would hang the send and time the test out.
    const e = await rejection(t.sendKey('tv', 'KEY_OK'));
    expect(e).to.include({ code: 'device_unavailable' });
    await t.close();
  });

  it('a missing socket is device_unavailable naming the socket', async () => {
    const t = new LircdTransport(join(dir, 'nope.sock'));
    const e = await rejection(t.sendKey('tv', 'KEY_OK'));
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.contain('nope.sock').and.contain('ENOENT');
    await t.close();
  });

  it('an abort rejects with the signal\'s reason at once', async () => {
    // Aborted once lircd has the request (and never answers): the 5 s timeout would reject with another message.
    const ac = new AbortController();
    const path = await serve(() => void ac.abort(new Error('stop')));
    const t = new LircdTransport(path, { timeoutMs: 5000 });
    const e = await rejection(t.sendKey('tv', 'KEY_OK', { signal: ac.signal }));
    expect((e as Error).message).to.equal('stop');
    await t.close();
  });

  it('send(trains) is refused: lircd sends by key name', async () => {
    const t = new LircdTransport(join(dir, 'x.sock'));
    const e = await rejection(t.send([{ frequency: 38000, dutyCycle: 33, durations: [560], gap: 0 }]));
    expect(e).to.include({ code: 'device_unavailable' });
    await t.close();
  });
});
