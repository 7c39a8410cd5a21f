/**
 * The node's side of the node <-> portal connection (src/farm/link/): a real
 * `farmhand serve` node configured with a portal, against a test-side
 * WebSocket server that speaks the portal's side of the protocol
 * (src/farm/protocol.ts). Real sockets, real HTTP, no mocks.
 */
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import request from 'supertest';
import { WebSocket, WebSocketServer } from 'ws';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { StartupError } from '../../src/daemon.js';
import { backoffDelay, PortalLink } from '../../src/farm/link/index.js';
import { EventHub } from '../../src/core/events.js';
import { AVAILABILITY_KINDS, availabilityText } from '../../src/core/availability.js';
import { capturingLogger } from '../helpers/logger.js';
import type { FileResultRepository } from '../../src/storage/results/index.js';
import {
  BASE_URL_HEADER,
  CONNECT_PATH,
  DELEGATE_HEADER,
  ON_BEHALF_HEADER,
  PROTOCOL_VERSION,
  type Hello,
  type NodeMessage,
  type PortalMessage,
} from '../../src/farm/protocol.js';
import type { ForwardResponse } from '../../src/farm/contract.js';
import { WsTunnel } from '../../src/farm/h2Tunnel.js';
import { H2LinkClient, H2_LIMITS } from '../../src/farm/hub/h2Client.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-test';
const CREDENTIAL = 'fhn_test_credential_0123456789';
const PORTAL_BASE = 'http://portal.example:9999';
const HANG = 'tests/hang.py::test_hang';
const PASS = 'tests/basic.py::test_pass';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** One node connection as the test portal sees it; its forwarded requests are HTTP/2 streams, made by the portal's own client. */
class Conn {
  readonly messages: NodeMessage[] = [];
  readonly tunnel: WsTunnel;
  readonly h2: H2LinkClient;

  constructor(
    readonly ws: WebSocket,
    readonly headers: IncomingHttpHeaders,
  ) {
    this.tunnel = new WsTunnel(ws);
    this.h2 = new H2LinkClient(this.tunnel, NODE, () => ws.close());
    // A request outstanding when the connection goes fails the test instead of hanging it.
    ws.on('close', () => this.h2.close('the connection closed before the answer ended'));
  }

  of<T extends NodeMessage['t']>(t: T): Extract<NodeMessage, { t: T }>[] {
    return this.messages.filter((m) => m.t === t) as Extract<NodeMessage, { t: T }>[];
  }

  receive(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.tunnel.deliver(data);
      return;
    }
    this.messages.push(JSON.parse(data.toString('utf8')) as NodeMessage);
  }

  send(m: PortalMessage): void {
    this.ws.send(JSON.stringify(m));
  }

  /** A forwarded request as the portal's hub makes one, its answer still streaming. */
  stream(method: string, p: string, opts: { user?: string; body?: unknown; headers?: Record<string, string> } = {}, signal?: AbortSignal): Promise<ForwardResponse> {
    const body = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const headers = { ...(body && { 'content-type': 'application/json' }), ...opts.headers };
    return this.h2.forward({ method, path: p, headers, ...(body && { body }), user: opts.user ?? 'alice', baseUrl: PORTAL_BASE }, signal);
  }

  /** ... and read in full. */
  async forward(method: string, p: string, opts: { user?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
    const res = await this.stream(method, p, opts);
    const chunks: Buffer[] = [];
    for await (const c of res.body) chunks.push(c as Buffer);
    return { status: res.status, headers: res.headers, body: Buffer.concat(chunks) };
  }
}

/** The portal's side of the protocol, small: accepts one credential, welcomes, forwards. */
class TestPortal {
  readonly conns: Conn[] = [];
  /** What the next welcome says. */
  heartbeatSecs = 0.2;
  endedJobs: string[] = [];
  /** The welcome's last_event_id (the last node event recorded); undefined: not sent, as an older portal. */
  lastEventId: string | null | undefined = undefined;
  /** Called at each upgrade attempt, accepted or not. */
  onUpgrade: () => void = () => undefined;
  private constructor(private readonly wss: WebSocketServer) {}

  static async start(): Promise<TestPortal> {
    const wss = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      path: CONNECT_PATH,
      verifyClient: (info: { req: { headers: IncomingHttpHeaders } }) => {
        portal.onUpgrade();
        return info.req.headers.authorization === `node ${CREDENTIAL}`;
      },
    });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    const portal: TestPortal = new TestPortal(wss);
    wss.on('connection', (ws, req) => {
      const conn = new Conn(ws, req.headers);
      portal.conns.push(conn);
      ws.on('message', (data, isBinary) => {
        conn.receive(data as Buffer, isBinary);
        const last = conn.messages.at(-1);
        if (!isBinary && last?.t === 'hello') conn.send({
            t: 'welcome',
            protocol: PROTOCOL_VERSION,
            heartbeat_secs: portal.heartbeatSecs,
            ended_jobs: portal.endedJobs,
            ...(portal.lastEventId !== undefined && { last_event_id: portal.lastEventId }),
          });
      });
    });
    return portal;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.wss.address() as AddressInfo).port}`;
  }

  /** The newest connection that said hello. */
  async connection(n = 1): Promise<Conn> {
    return waitFor(() => (this.conns.filter((c) => c.of('hello').length).length >= n ? this.conns.filter((c) => c.of('hello').length)[n - 1] : undefined), {
      what: `hello number ${n}`,
      timeoutMs: 30_000,
    });
  }

  close(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    return new Promise((resolve) => this.wss.close(() => resolve()));
  }
}

describe('the node side of the portal connection (src/farm/link/)', function () {
  this.timeout(120_000);
  let portal: TestPortal;
  let d: TestDaemon;
  let credDir: string;
  const logger = capturingLogger();

  before(async () => {
    portal = await TestPortal.start();
    credDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-cred-'));
    await writeFile(path.join(credDir, 'credential'), `${CREDENTIAL}\n`);
    d = await startTestDaemon({ logger, config: { portal: { url: portal.url, node_credential_file: path.join(credDir, 'credential') }, runner: { stop_response_secs: 60 } } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
    await portal?.close();
    await rm(credDir, { recursive: true, force: true });
  });

  it("connects with the credential and its node id, says hello, and its state follows in its stream: node.state, typed, after the welcome", async () => {
    const c = await portal.connection();
    expect(c.headers.authorization).to.equal(`node ${CREDENTIAL}`);
    expect(c.headers['x-farmhand-node']).to.equal(NODE);
    const hello = c.of('hello')[0] as Hello;
    expect(hello).to.include({ protocol: PROTOCOL_VERSION, node_id: NODE, job: null });
    expect(hello.version).to.be.a('string').and.not.equal('');
    expect(hello).not.to.have.any.keys('snapshot', 'availability');
    // The state is an event of the stream (journaled: the node's hub has it with its internal events, not its public ones).
    await waitFor(() => c.of('event').some((m) => m.event.type === 'node.state'), 'a node.state event');
    const state = c.of('event').filter((m) => m.event.type === 'node.state').at(-1)!.event.data as unknown as { node: Record<string, unknown>; availability: { kind: string; detail: string | null } };
    expect(state.node).to.include({ node_id: NODE, node_url: `${new URL(portal.url).origin}/api/v2/nodes/${NODE}` });
    expect(state.node).to.have.property('available');
    // Its availability typed (a kind and a detail), the v2 reason rendered from it, the v2 object itself unchanged.
    expect(AVAILABILITY_KINDS).to.include(state.availability.kind);
    expect(state.node.not_available_reason).to.equal(availabilityText(state.availability as never));
    expect(state.node).not.to.have.property('availability');
    const hub = d.daemon.services.events!.hub;
    expect(hub.buffered({ internal: true }).some((e) => e.type === 'node.state')).to.equal(true);
    expect(hub.buffered().some((e) => e.type === 'node.state')).to.equal(false, 'not a public event');
    expect(c.of('snapshot' as never)).to.have.length(0);
    await waitFor(() => d.daemon.portalLink?.connected, 'the link to be welcomed');
    const metrics = await request(d.url).get('/metrics');
    expect(metrics.text).to.match(/^farmhand_portal_connected 1$/m);
  });

  it('heartbeats at the interval the welcome gives', async () => {
    const c = await portal.connection();
    await waitFor(() => c.of('hb').length >= 3, { what: 'three heartbeats', timeoutMs: 30_000 });
  });

  it('answers a forwarded screenshot with its status, headers and bytes, as the on-behalf user', async () => {
    const c = await portal.connection();
    const a = await c.forward('GET', `/api/v2/nodes/${NODE}/screenshot.png`, { user: 'carol' });
    expect(a.status).to.equal(200);
    expect(a.headers['content-type']).to.equal('image/png');
    expect(a.body.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).to.equal(true);
    expect(Number(a.headers['content-length'])).to.equal(a.body.length);
    // The screenshot was a use of the node by carol: the node's status says so.
    const status = await c.forward('GET', `/api/v2/nodes/${NODE}`, { user: 'carol' });
    expect(JSON.parse(status.body.toString())).to.include({ last_used_by: 'carol', node_url: `${PORTAL_BASE}/api/v2/nodes/${NODE}` });
  });

  it('answers a forwarded run_tests (a body in frames) with links to the portal; the run events and a new node.state follow', async () => {
    const c = await portal.connection();
    const before = c.messages.length;
    const a = await c.forward('POST', '/api/v2/run_tests', {
      user: 'dave',
      body: { node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} },
    });
    expect(a.status, a.body.toString()).to.equal(200);
    expect(a.headers['content-type']).to.match(/^application\/json/);
    const job = JSON.parse(a.body.toString()) as { job_uid: string; job_url: string };
    expect(job.job_url).to.equal(`${PORTAL_BASE}/api/v2/jobs${job.job_uid}`);
    const events = () => c.messages.slice(before).filter((m) => m.t === 'event').map((m) => m.event);
    await waitFor(() => events().some((e) => e.type === 'job.exited' && (e.data as { job_uid?: string }).job_uid === job.job_uid), { what: 'job.exited from the node', timeoutMs: 60_000 });
    expect(events().map((e) => e.type)).to.include.members(['job.started', 'run.started', 'run.finished', 'job.exited']);
    const started = events().find((e) => e.type === 'job.started')!;
    expect(started.data).to.include({ job_uid: job.job_uid, username: 'dave', node_id: NODE });
    // The node's state changed: a node.state with the job and its user.
    const stateOf = (e: { data: unknown }) => (e.data as { node: { job?: { job_uid?: string } | null; last_used_by?: string } }).node;
    await waitFor(
      () => events().some((e) => e.type === 'node.state' && stateOf(e).job?.job_uid === job.job_uid && stateOf(e).last_used_by === 'dave'),
      { what: 'a node.state with the new job', timeoutMs: 30_000 },
    );
  });

  it('passes on an event published on the node (a press through the API)', async () => {
    const c = await portal.connection();
    d.daemon.services.events!.hub.publish('key.pressed', { key: 'KEY_OK', remote: 'vstb', hold_ms: 0, source: 'api', username: 'erin', result_id: null });
    await waitFor(() => c.of('event').some((m) => m.event.type === 'key.pressed' && (m.event.data as { username: string }).username === 'erin'), 'the key.pressed event');
  });

  it('ignores the delegate headers on a direct request without the secret (403 without a token)', async () => {
    const forged = await request(d.url)
      .get(`/api/v2/nodes/${NODE}`)
      .set(DELEGATE_HEADER, 'guessed-secret')
      .set(ON_BEHALF_HEADER, 'mallory')
      .set(BASE_URL_HEADER, 'http://evil.example');
    expect(forged.status).to.equal(403);
    expect(forged.body.error).to.equal('forbidden');
    // With a real token: the token's user, the request's own base URL; the forged headers count for nothing.
    const as = await asUser(d, 'frank');
    const res = await as.get(`/api/v2/nodes/${NODE}/screenshot.png`).set(DELEGATE_HEADER, 'guessed-secret').set(ON_BEHALF_HEADER, 'mallory');
    expect(res.status).to.equal(200);
    const status = await as.get(`/api/v2/nodes/${NODE}`).set(DELEGATE_HEADER, '').set(ON_BEHALF_HEADER, 'mallory').set(BASE_URL_HEADER, 'http://evil.example');
    expect(status.body).to.include({ last_used_by: 'frank', node_url: `${d.url}/api/v2/nodes/${NODE}` });
  });

  it("streams a large answer within its stream's window, without holding up the link, every byte intact", async () => {
    const c = await portal.connection();
    // A result with a large artifact (written into the result folder of the last run).
    const jobs = await c.forward('GET', `/api/v2/results?filter=${encodeURIComponent(`testcase:${PASS}`)}`);
    const [r] = JSON.parse(jobs.body.toString()) as Array<{ result_id: string }>;
    const dir = (d.daemon.services.results as FileResultRepository).dirOf(r!.result_id);
    const big = Buffer.alloc(48 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'big.bin'), big);
    // The portal does not read this answer: the node sends at most the stream's window, and the link is not held up
    // (another request on it is answered meanwhile); then it reads, and every byte comes.
    const res = await c.stream('GET', `/api/v2/results${r!.result_id}/artifacts/big.bin`);
    expect(res.status).to.equal(200);
    res.body.pause();
    await waitFor(() => res.body.readableLength > H2_LIMITS.streamWindowBytes / 2, 'the stream window to fill');
    expect((await c.forward('GET', `/api/v2/nodes/${NODE}`)).status).to.equal(200);
    expect(res.body.readableLength).to.be.at.most(H2_LIMITS.streamWindowBytes);
    const chunks: Buffer[] = [];
    for await (const x of res.body) chunks.push(x as Buffer);
    const body = Buffer.concat(chunks);
    expect(body.length).to.equal(big.length);
    expect(body.equals(big)).to.equal(true);
  });

  it('stops a running job the portal says it has ended (welcome.ended_jobs) on the next connection', async () => {
    const c = await portal.connection(portal.conns.filter((x) => x.of('hello').length).length);
    const a = await c.forward('POST', '/api/v2/run_tests', { user: 'gina', body: { node_id: NODE, test_pack_revision: 'main', test_cases: [HANG], shuffle: false, tags: {} } });
    expect(a.status, a.body.toString()).to.equal(200);
    const { job_uid } = JSON.parse(a.body.toString()) as { job_uid: string };
    await waitFor(() => d.daemon.services.jobs.current()?.current_run, 'the hanging run to start');
    const hellos = portal.conns.filter((x) => x.of('hello').length).length;
    portal.endedJobs = [job_uid];
    c.ws.close(1001, 'portal restarting'); // the portal goes; the node comes back and is told
    const next = await portal.connection(hellos + 1);
    expect((next.of('hello')[0] as Hello).job).to.deep.equal({ job_uid, status: 'running' });
    await waitFor(() => d.daemon.services.jobs.get(job_uid)?.status === 'exited', { what: 'the ended job to stop', timeoutMs: 60_000 });
    portal.endedJobs = [];
  });

  it('reconnects after the portal closes the socket (a second hello)', async () => {
    const n = portal.conns.filter((x) => x.of('hello').length).length;
    const c = await portal.connection(n);
    const connections = d.daemon.portalLink!.connections;
    c.ws.terminate();
    const next = await portal.connection(n + 1);
    expect(next.headers.authorization).to.equal(`node ${CREDENTIAL}`);
    await waitFor(() => d.daemon.portalLink!.connections > connections, 'the new connection to be welcomed');
    // The new connection carries forwarded requests as the old one did.
    const a = await next.forward('GET', `/api/v2/nodes/${NODE}`);
    expect(a.status).to.equal(200);
  });

  it("sends again the events after the welcome's last_event_id (those in flight when the connection died), and all of them when it is null", async () => {
    const hellos = () => portal.conns.filter((x) => x.of('hello').length).length;
    const c = await portal.connection(hellos());
    const hub = d.daemon.services.events!.hub;
    const users = (conn: Conn) => conn.of('event').map((m) => (m.event.data as { username?: string }).username);
    for (const u of ['resend-1', 'resend-2', 'resend-3']) hub.publish('key.pressed', { key: 'KEY_OK', remote: 'vstb', hold_ms: 0, source: 'api', username: u, result_id: null });
    await waitFor(() => users(c).includes('resend-3'), 'the three presses on the socket');
    const [first] = hub.buffered().slice(-3);
    try {
      // The portal recorded only the first; the other two were on their way when the connection died.
      portal.lastEventId = first!.id;
      let n = hellos();
      c.ws.terminate();
      const next = await portal.connection(n + 1);
      await waitFor(() => users(next).includes('resend-3'), 'the two unrecorded presses sent again');
      expect(next.of('event').filter((m) => m.event.type === 'key.pressed').map((m) => (m.event.data as { username?: string }).username)).to.deep.equal(['resend-2', 'resend-3']);
      // Nothing recorded: the whole buffer.
      portal.lastEventId = null;
      n = hellos();
      next.ws.terminate();
      const again = await portal.connection(n + 1);
      // Every buffered event, and of the node's states (internal) only the last: it says all the earlier ones did.
      const all = hub.buffered({ internal: true });
      const lastState = all.findLastIndex((e) => e.type === 'node.state');
      const expected = all.filter((e, i) => e.type !== 'node.state' || i === lastState).map((e) => e.id);
      await waitFor(() => again.of('event').length >= expected.length, 'every buffered event sent');
      expect(again.of('event').map((m) => m.event.id)).to.deep.equal(expected);
      expect(lastState).to.be.greaterThan(-1);
    } finally {
      portal.lastEventId = undefined;
    }
  });

  it('aborts a forwarded request whose stream the portal resets, and answers the next one', async () => {
    const c = await portal.connection(portal.conns.filter((x) => x.of('hello').length).length);
    // An events request is held open by the node (SSE) until its stream is reset.
    const ac = new AbortController();
    const res = await c.stream('GET', '/api/v2/events', { headers: { accept: 'text/event-stream' } }, ac.signal);
    res.body.on('error', () => undefined);
    expect(res.status).to.equal(200);
    await waitFor(() => d.daemon.services.events!.stream.clientsConnected > 0, 'the event stream to be open on the node');
    ac.abort();
    await waitFor(() => d.daemon.services.events!.stream.clientsConnected === 0, 'the reset stream to close on the node');
    expect((await c.forward('GET', `/api/v2/nodes/${NODE}`)).status).to.equal(200);
  });

  it("logs the link's state, and neither the credential nor the delegate header", () => {
    const messages = logger.messages();
    expect(messages).to.include.members(['connecting to the portal', 'connected to the portal', 'disconnected from the portal']);
    const text = logger.text();
    expect(text).not.to.include(CREDENTIAL);
    expect(text.toLowerCase()).not.to.include(DELEGATE_HEADER);
  });
});

describe('the portal section of the node config', function () {
  this.timeout(60_000);

  it('a missing credential file stops start-up with exit code 78', async () => {
    const err = await startTestDaemon({ config: { portal: { url: 'http://127.0.0.1:9', node_credential_file: path.join(os.tmpdir(), 'no-such-farmhand-credential') } } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(StartupError);
    expect((err as StartupError).exitCode).to.equal(78);
    expect((err as Error).message).to.match(/node_credential_file/);
  });

  it('an empty credential file stops start-up with exit code 78', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-cred-'));
    try {
      await writeFile(path.join(dir, 'credential'), '\n');
      const err = await startTestDaemon({ config: { portal: { url: 'http://127.0.0.1:9', node_credential_file: path.join(dir, 'credential') } } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as StartupError).exitCode).to.equal(78);
      expect((err as Error).message).to.match(/empty/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the URL must be http(s) or ws(s); a relative credential file is relative to the config file', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-conf-'));
    try {
      const file = path.join(dir, 'farmhand.json');
      await writeFile(file, JSON.stringify({ test_pack: { url: 'https://example.com/pack.git' }, portal: { url: 'wss://portal.example', node_credential_file: 'node.cred' } }));
      expect(loadConfig(file).portal).to.deep.equal({ url: 'wss://portal.example', node_credential_file: path.join(dir, 'node.cred') });
      await writeFile(file, JSON.stringify({ test_pack: { url: 'https://example.com/pack.git' }, portal: { url: 'ftp://portal.example', node_credential_file: 'x' } }));
      expect(() => loadConfig(file)).to.throw(ConfigError, /portal\.url/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reconnect_max_secs caps the wait between attempts to reach the portal; more than 30 (the portal`s restart grace) or less than 0.1 is refused', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-cred-'));
    const logger = capturingLogger();
    try {
      await writeFile(path.join(dir, 'credential'), 'some-credential\n');
      // Nothing listens on the discard port: every attempt fails at once and logs the wait before the next.
      const d = await startTestDaemon({
        logger,
        config: { capture: { uri: 'none:' }, portal: { url: 'http://127.0.0.1:9', node_credential_file: path.join(dir, 'credential'), reconnect_max_secs: 0.2 } },
      });
      try {
        // By the 8th attempt the default back-off's ceiling is 30 s (0.5 s doubling): each of these waits would be
        // over 0.2 s with a probability of 1 - 0.2 / ceiling.
        const waits = await waitFor(
          () => {
            const w = logger.entries.filter((e) => typeof e.obj.retry_in_ms === 'number').map((e) => e.obj.retry_in_ms as number);
            return w.length >= 8 ? w : undefined;
          },
          { what: '8 failed attempts to reach the portal', timeoutMs: 30_000 },
        );
        expect(Math.max(...waits), waits.join(', ')).to.be.below(200);
      } finally {
        await d.stop();
      }
      const file = path.join(dir, 'farmhand.json');
      await writeFile(file, JSON.stringify({ test_pack: { url: 'https://example.com/pack.git' }, portal: { url: 'wss://portal.example', node_credential_file: 'x', reconnect_max_secs: 31 } }));
      expect(() => loadConfig(file)).to.throw(ConfigError, /portal\.reconnect_max_secs/);
      await writeFile(file, JSON.stringify({ test_pack: { url: 'https://example.com/pack.git' }, portal: { url: 'wss://portal.example', node_credential_file: 'x', reconnect_max_secs: 0.01 } }));
      expect(() => loadConfig(file)).to.throw(ConfigError, /portal\.reconnect_max_secs/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('without it the node connects nowhere and the delegate headers mean nothing', async () => {
    const d = await startTestDaemon({ config: { capture: { uri: 'none:' } } });
    try {
      expect(d.daemon.portalLink).to.equal(undefined);
      const res = await request(d.url).get(`/api/v2/nodes/${NODE}`).set(DELEGATE_HEADER, 'anything').set(ON_BEHALF_HEADER, 'mallory');
      expect(res.status).to.equal(403);
    } finally {
      await d.stop();
    }
  });
});

describe('a refused credential', function () {
  this.timeout(60_000);

  it('is logged once with what to do, and retried with back-off until stopped', async () => {
    const portal = await TestPortal.start();
    const logger = capturingLogger();
    let attempts = 0;
    portal.onUpgrade = () => attempts++;
    const link = new PortalLink({
      portalUrl: portal.url,
      credential: 'not-the-credential',
      nodeId: NODE,
      version: 'test',
      localUrl: 'http://127.0.0.1:9',
      delegateSecret: 'unused',
      state: () => Promise.resolve({ snapshot: {}, availability: { kind: 'available', detail: null } }),
      job: () => null,
      stopJob: () => Promise.resolve(),
      events: new EventHub({ nodeId: NODE }),
      logger,
      backoff: { baseMs: 10, capMs: 50 },
    });
    try {
      link.start();
      await waitFor(() => attempts >= 4, { what: 'four attempts', timeoutMs: 30_000 });
      const refusals = logger.entries.filter((e) => e.msg.startsWith("the portal refused the node's credential (401)"));
      expect(refusals.filter((e) => e.level === 'warn')).to.have.length(1);
      expect(refusals.length).to.be.greaterThan(1);
      expect(refusals[0]!.msg).to.include('farmhand farm node add');
      expect(link.connected).to.equal(false);
      expect(logger.text()).not.to.include('not-the-credential');
    } finally {
      await link.stop();
      await portal.close();
    }
  });
});

describe('the back-off (full jitter)', () => {
  it('waits up to base * 2^attempt, never more than the cap', () => {
    const b = { baseMs: 500, capMs: 30_000 };
    expect(backoffDelay(0, b, () => 0.999)).to.be.below(500);
    expect(backoffDelay(3, b, () => 0.999)).to.be.within(3990, 3999);
    expect(backoffDelay(20, b, () => 0.999)).to.be.within(29_000, 29_999);
    expect(backoffDelay(5, b, () => 0)).to.equal(0);
  });
});
