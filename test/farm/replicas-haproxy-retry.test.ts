/**
 * The replicas' HAProxy (`test/helpers/rollingFarm.ts` startFront, as docs/farm.md's "HAProxy in front of the
 * portal" with replicas) sends a request again, to another replica, when the replica it went to closed the
 * connection without answering anything. That is what a stopping replica does, by the kernel, to the connections
 * that had completed their handshake on its listener but were not yet accepted when its drain closed the listener
 * (src/farm/portal/drain.ts): reset, the request unread. Without `retry-on ... empty-response` HAProxy answered such
 * a request 502, or, on a kept-alive client connection, closed the client's connection unanswered ("fetch failed"
 * at the client: replicas-rolling (a), a `run_tests` during a rolling restart).
 *
 * First the cause, with the portal's own drain: a connection the kernel queued on the listener (the event loop not
 * turning meanwhile, as on a loaded machine) when the drain begins is reset, its request never read.
 *
 * Then real Debian `haproxy`, two stand-in replicas on raw sockets: `gone` answers HAProxy's checks (`GET /readyz`) 200
 * and resets every other connection once its request is read (as the kernel resets a queued one); `ok` answers
 * everything 200. The checks keep both up, so roundrobin sends requests to `gone` too.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Drain } from '../../src/farm/portal/drain.js';
import { freePort } from '../helpers/processFarm.js';
import { startFront, type Front } from '../helpers/rollingFarm.js';
import { waitFor } from '../helpers/wait.js';

const WAIT = { timeoutMs: 60_000, maxIntervalMs: 200 };

/** A stand-in replica: reads each connection's request head; `answer` says what it does with it. */
function standIn(port: number, answer: (head: string, sock: net.Socket) => void): Promise<net.Server> {
  const server = net.createServer((sock) => {
    let head = '';
    sock.on('error', () => undefined);
    sock.on('data', (b: Buffer) => {
      head += b.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head.slice(0, end))?.[1] ?? 0);
      if (head.length - end - 4 < len) return;
      sock.removeAllListeners('data');
      answer(head, sock);
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

const ok = (sock: net.Socket, body: string) =>
  sock.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);

/** Connections waiting in the accept queue of the IPv4 listener on `port` (/proc/net/tcp: a listener's rx_queue). */
function acceptQueue(port: number): number {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1]?.endsWith(local) && f[3] === '0A') return parseInt(f[4]!.split(':')[1]!, 16);
  }
  return 0;
}

describe('farm: a stopping replica`s drain resets the connections queued on its listener', () => {
  it('a request on a connection queued when the drain begins is reset unread (what the retry below covers)', async () => {
    const server = http.createServer();
    let handled = 0;
    const drain = new Drain(server, (_req, res) => {
      handled++;
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const client = net.connect(port, '127.0.0.1');
    client.write('POST /api/v2/run_tests HTTP/1.1\r\nHost: farm\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
    let answer = '';
    client.on('data', (b: Buffer) => (answer += b.toString()));
    const ended = new Promise<string | undefined>((resolve) => {
      client.once('error', (e: NodeJS.ErrnoException) => resolve(e.code));
      client.once('close', () => resolve(undefined));
    });
    // net.connect connects on the next tick; then, without turning the event loop (so Node accepts nothing), wait
    // for the kernel to queue the connection on the listener, and begin the drain as a SIGTERM would.
    await new Promise<void>((r) => process.nextTick(r));
    const end = Date.now() + 10_000;
    while (acceptQueue(port) < 1 && Date.now() < end);
    expect(acceptQueue(port), 'the connection queued on the listener').to.equal(1);
    const drained = drain.run(0, 0, 2);
    expect(await ended, `the client's end (answer: ${JSON.stringify(answer)})`).to.equal('ECONNRESET');
    expect(answer).to.equal('');
    expect(await drained).to.equal(0);
    expect(handled).to.equal(0);
  });
});

describe('farm: the replicas` HAProxy sends a request again when a replica reset it unanswered', function () {
  this.timeout(120_000);
  let work: string;
  let front: Front;
  const servers: net.Server[] = [];
  /** The requests the stand-in reset (request line and body), and their Idempotency-Key headers. */
  const reset: string[] = [];
  const keys: (string | undefined)[] = [];

  before(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-hap-retry-'));
    const ports = { gone: await freePort(), ok: await freePort() };
    servers.push(
      await standIn(ports.gone, (head, sock) => {
        if (head.startsWith('GET /readyz ')) return ok(sock, '{"ready":true}');
        reset.push(`${head.split('\r\n', 1)[0]} ${head.slice(head.indexOf('\r\n\r\n') + 4)}`);
        keys.push(keyOf(head));
        sock.resetAndDestroy();
      }),
      await standIn(ports.ok, (head, sock) => ok(sock, JSON.stringify({ served: 'ok', request: head.split('\r\n', 1)[0], key: keyOf(head) }))),
    );
    front = await startFront(work, ports);
    for (const name of Object.keys(ports)) await waitFor(async () => (await front.state(name)) === 2, { what: `HAProxy to see ${name} up`, ...WAIT });
  });
  after(async () => {
    front?.stop();
    for (const s of servers) await new Promise((r) => s.close(r));
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('a run_tests (POST) and a GET the replica reset are answered by another replica, on a kept-alive client connection too', async () => {
    // fetch keeps its connection to HAProxy alive: after the first request, a failure on the server side is one
    // HAProxy would answer by closing the client's connection unanswered.
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const post = await fetch(`${front.url}/api/v2/run_tests`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ node_id: 'n', i }) });
      expect(post.status, `POST ${i}`).to.equal(200);
      seen.push(((await post.json()) as { request: string }).request);
      const get = await fetch(`${front.url}/api/v2/jobs/n/1/${i}/await_completion`);
      expect(get.status, `GET ${i}`).to.equal(200);
      seen.push(((await get.json()) as { request: string }).request);
    }
    expect(seen).to.have.length(12);
    // The reset replica was sent requests (else this test shows nothing), a run_tests among them, and one after the
    // first request of the client's connection.
    expect(reset.some((r) => r.startsWith('POST /api/v2/run_tests ')), reset.join('; ')).to.equal(true);
    expect(reset.some((r) => !r.endsWith('"i":0}')), reset.join('; ')).to.equal(true);
  });

  it('a v2 run_tests without an Idempotency-Key is given one, the same on the request sent again; a client\'s own is kept; nothing else gets one', async () => {
    reset.length = keys.length = 0;
    const answered: { key: string | undefined; i: number }[] = [];
    for (let i = 0; i < 6; i++) {
      const post = await fetch(`${front.url}/api/v2/run_tests`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ node_id: 'n', i }) });
      expect(post.status, `POST ${i}`).to.equal(200);
      answered.push({ key: ((await post.json()) as { key?: string }).key, i });
    }
    // Every start got a key, each its own.
    expect(answered.every((a) => typeof a.key === 'string' && /^[\x21-\x7e]{1,255}$/.test(a.key)), JSON.stringify(answered)).to.equal(true);
    expect(new Set(answered.map((a) => a.key)).size).to.equal(6);
    // A start reset by the first replica reached the other with the key it had there: the node answers it with the
    // job the first one may have started.
    const resetStarts = reset.map((r, n) => ({ i: Number(/"i":(\d+)/.exec(r)?.[1]), key: keys[n] })).filter((r) => Number.isInteger(r.i));
    expect(resetStarts.length, reset.join('; ')).to.be.greaterThan(0);
    for (const r of resetStarts) expect(r.key, `start ${r.i}`).to.equal(answered[r.i]!.key);
    const own = await fetch(`${front.url}/api/v2/run_tests`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'my-own-key-1' }, body: '{}' });
    expect(((await own.json()) as { key?: string }).key).to.equal('my-own-key-1');
    const v1 = await fetch(`${front.url}/api/v1/run_tests`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(((await v1.json()) as { key?: string }).key).to.equal(undefined);
    const get = await fetch(`${front.url}/api/v2/jobs/n/1/1`);
    expect(((await get.json()) as { key?: string }).key).to.equal(undefined);
  });
});

/** A raw request head's Idempotency-Key header, if any. */
function keyOf(head: string): string | undefined {
  return /\r\nidempotency-key: *([^\r]*)/i.exec(head)?.[1];
}
