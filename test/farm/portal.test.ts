/**
 * The portal's HTTP side on a real portal (startPortal) over a throwaway
 * PostgreSQL, with nodes as raw WebSocket clients: the nodes list and its
 * overlays, forwarding of node-scoped v2 calls (user, base URL, 404 unknown,
 * 503 offline, 403 reserved by another), jobs answered from PostgreSQL while
 * their node is away, and the config loader.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError } from '../../src/config/load.js';
import type { FarmReservation, FarmReservations } from '../../src/farm/contract.js';
import { loadPortalConfig } from '../../src/farm/portal/config.js';
import { busyReason } from '../../src/farm/portal/farm.js';
import { runCli } from '../../src/cli/program.js';
import { runCaptured } from '../helpers/cli.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { SimNode, type SimNodeOptions } from '../helpers/farmNodes.js';
import { PROTOCOL_VERSION } from '../../src/farm/protocol.js';
import { waitFor } from '../helpers/wait.js';
import { throughReplicas } from '../helpers/farm.js';

const WAIT = { timeoutMs: 30_000 };

/** Reservations held in a map: the seam hC's PostgreSQL reservations fill at merge. */
class MapReservations implements FarmReservations {
  readonly held = new Map<string, FarmReservation>();
  reserve(): Promise<FarmReservation[]> {
    throw new Error('not in this test');
  }
  extend(): Promise<void> {
    throw new Error('not in this test');
  }
  end(): Promise<void> {
    throw new Error('not in this test');
  }
  interrupt(): Promise<void> {
    throw new Error('not in this test');
  }
  active(nodeId: string) {
    return Promise.resolve(this.held.get(nodeId));
  }
  activeAll() {
    return Promise.resolve(new Map(this.held));
  }
}

describe('farm portal (HTTP)', function () {
  this.timeout(60_000);
  let cluster: TestPostgres;
  let t: TestPortal;
  let reservations: MapReservations;
  let alice: string;
  let bob: string;
  const nodes: SimNode[] = [];

  const call = (token: string | undefined, p: string, init: RequestInit = {}) =>
    fetch(`${t.portal.url}${p}`, { ...init, headers: { ...(token && { Authorization: `token ${token}` }), ...(init.body ? { 'Content-Type': 'application/json' } : {}), ...init.headers } });
  const json = async (r: Response) => (await r.json()) as Record<string, unknown>;
  const node = async (nodeId: string, o: Partial<SimNodeOptions> = {}) => {
    const credential = await t.registerNode(nodeId);
    const n = new SimNode({ portalUrl: t.portal.url, nodeId, credential, ...o });
    nodes.push(n);
    await n.connect();
    await waitFor(() => n.welcome, WAIT);
    n.startHeartbeats();
    return n;
  };

  before(async function () {
    this.timeout(120_000);
    cluster = await startPostgres();
  });
  after(async () => {
    await cluster?.stop();
  });
  beforeEach(async () => {
    reservations = new MapReservations();
    t = await startTestPortal(cluster, { heartbeat_secs: 1 }, { reservations });
    alice = t.tokenFor('alice');
    bob = t.tokenFor('bob');
  });
  afterEach(async () => {
    for (const n of nodes.splice(0)) n.kill();
    await t.stop();
  });

  it('needs a token on v2, and answers the user', async () => {
    const r = await call(undefined, '/api/v2/nodes');
    expect(r.status).to.equal(403);
    expect((await json(r)).error).to.equal('forbidden');
    expect(await json(await call(alice, '/api/v2/user'))).to.deep.equal({ login: 'alice' });
  });

  it('lists every registered node with the portal overlays: online, node_url, address, reservation, availability', async () => {
    await t.registerNode('list-never');
    await node('list-on', { snapshot: { node_id: 'list-on', online: true, available: true, not_available_reason: null, friendly_name: 'Box A', job: null, node_url: 'http://node-itself/x' } });
    await node('list-res', { snapshot: { node_id: 'list-res', online: true, available: true, not_available_reason: null, job: null } });
    reservations.held.set('list-res', { reservation_id: 5, node_id: 'list-res', username: 'alice', start_time: '2026-11-24T00:00:00.000Z', expires: null, message: 'mine', ended: false, lease_secs: null });
    const r = await call(bob, '/api/v2/nodes');
    expect(r.status).to.equal(200);
    const list = (await r.json()) as Record<string, unknown>[];
    const byId = new Map(list.map((n) => [n.node_id, n]));
    expect(byId.get('list-never')).to.deep.include({ online: false, available: false, not_available_reason: 'offline: it has never connected to the portal', job: null, reservation: null });
    expect(byId.get('list-on')).to.deep.include({
      online: true,
      available: true,
      not_available_reason: null,
      friendly_name: 'Box A',
      node_url: `${t.portal.url}/api/v2/nodes/list-on`,
      external_ip_address: '127.0.0.1',
    });
    const reserved = byId.get('list-res')!;
    expect(reserved).to.deep.include({ available: false, not_available_reason: 'reserved by alice (reservation 5)' });
    expect(reserved.reservation).to.deep.include({ reservation_id: 5, username: 'alice', reserved_by_you: false });

    const one = await call(alice, '/api/v2/nodes/list-res');
    expect((await json(one)).reservation).to.deep.include({ reserved_by_you: true });
    const unknown = await call(alice, '/api/v2/nodes/nobody');
    expect(unknown.status).to.equal(404);
    expect((await json(unknown)).error).to.equal('not_found');
  });

  it("decides availability by the node's kind, not its reason's text: a health check whose reason starts 'reserved by ' holds the node back; the node's own reserved and running are the portal's to say", async () => {
    // A maintenance message that happens to begin like a reservation: read by its text, the portal took it for one.
    const rewiring = 'reserved by facilities: rewiring the bench until noon';
    const base = { online: true, available: false, job: null };
    await node('kind-health', { snapshot: { node_id: 'kind-health', ...base, not_available_reason: rewiring }, availability: { kind: 'unhealthy', detail: rewiring } });
    // The node's own reservation (its text made to look like a health check's): not the farm's, so not a reason.
    const own = await node('kind-own-res', {
      snapshot: { node_id: 'kind-own-res', ...base, not_available_reason: 'health check failed: none' },
      availability: { kind: 'reserved', detail: 'mallory (reservation 77)' },
    });
    const nodeOf = async (id: string) => json(await call(alice, `/api/v2/nodes/${id}`));
    expect(await nodeOf('kind-health')).to.deep.include({ available: false, not_available_reason: rewiring, online: true });
    expect(busyReason(t.portal.hub.link('kind-health'))).to.equal(rewiring);
    expect(await nodeOf('kind-own-res')).to.deep.include({ available: true, not_available_reason: null });
    expect(busyReason(t.portal.hub.link('kind-own-res'))).to.equal(null);
    // A node.state changes the kind: its licence expired (the reason rendered from the kind and detail, as on the node).
    own.state({ node_id: 'kind-own-res', ...base, not_available_reason: 'licence expired on 2020-01-01' }, { kind: 'licence_expired', detail: '2020-01-01' });
    await waitFor(() => t.portal.hub.link('kind-own-res')?.availability?.kind === 'licence_expired', WAIT);
    expect(await nodeOf('kind-own-res')).to.deep.include({ available: false, not_available_reason: 'licence expired on 2020-01-01' });
    expect(busyReason(t.portal.hub.link('kind-own-res'))).to.equal('licence expired on 2020-01-01');
    // The v2 object is the spec's: the kind is not in it.
    expect(await nodeOf('kind-health')).not.to.have.property('availability');
  });

  it("never reads the reason's text: a state with no kind, or a kind this portal does not know, holds the node back (unhealthy, saying so); a node of protocol 1 is refused", async () => {
    const base = { online: true, available: false, job: null };
    await node('no-kind', { snapshot: { node_id: 'no-kind', ...base, not_available_reason: 'reserved by bob (reservation 3)' }, availability: null });
    await node('odd-kind', { snapshot: { node_id: 'odd-kind', ...base, not_available_reason: 'health check failed: no signal' }, availability: { kind: 'on fire', detail: 7 } });
    for (const id of ['no-kind', 'odd-kind']) {
      await waitFor(() => t.portal.hub.link(id)?.availability != null, WAIT);
      expect(t.portal.hub.link(id)!.availability!.kind, id).to.equal('unhealthy');
      expect(t.portal.hub.link(id)!.availability!.detail, id).to.include('upgrade the portal');
    }
    const nodeOf = async (id: string) => json(await call(alice, `/api/v2/nodes/${id}`));
    // On the previous code the text 'reserved by bob ...' was read as the node's own reservation: available.
    expect(await nodeOf('no-kind')).to.deep.include({ available: false });
    expect(await nodeOf('odd-kind')).to.deep.include({ available: false });
    // A state too large to keep (it would sit in the nodes row) is refused; the next, of a sane size, is kept.
    const odd = nodes.find((n) => n.o.nodeId === 'odd-kind')!;
    odd.state({ node_id: 'odd-kind', ...base, friendly_name: 'sane' }, { kind: 'unhealthy', detail: 'health check failed: no signal' });
    await waitFor(() => t.portal.hub.link('odd-kind')?.snapshot?.friendly_name === 'sane', WAIT);
    odd.state({ node_id: 'odd-kind', ...base, friendly_name: 'big', padding: 'x'.repeat(300 * 1024) });
    // A key press after it: once the portal has it, it has read the big state before it; then both are folded.
    let pressed = false;
    const off = t.portal.hub.onEvent((e) => (pressed ||= e.type === 'key.pressed' && e.data.node_id === 'odd-kind'));
    odd.event({ id: 'sim.key.1', type: 'key.pressed', time: new Date().toISOString(), data: { node_id: 'odd-kind', key: 'KEY_OK', remote: 'r', hold_ms: 0, source: 'api', username: 'x', result_id: null } });
    await waitFor(() => pressed, WAIT);
    off();
    expect(t.portal.hub.link('odd-kind')!.snapshot).to.include({ friendly_name: 'sane' });
    const kept = await t.portal.pool.query<{ name: string }>(`SELECT state->'node'->>'friendly_name' AS name FROM nodes WHERE node_id = 'odd-kind'`);
    expect(kept.rows[0]!.name).to.equal('sane');
    // A node of an older protocol (2: the link's own multiplexer) is closed at its hello, with the reason and what to do.
    const cred = await t.registerNode('old-proto');
    const old = new SimNode({ portalUrl: t.portal.url, nodeId: 'old-proto', credential: cred });
    nodes.push(old);
    await old.connect({ hello: false });
    old.send({ t: 'hello', protocol: 2, node_id: 'old-proto', version: 'old', job: null });
    await waitFor(() => old.closed, WAIT);
    expect(PROTOCOL_VERSION).to.equal(3);
    expect(old.closed!.reason).to.equal('protocol 3 expected, got 2: upgrade the nodes and the portal together');
  });

  it('forwards node-scoped calls with the caller and the portal URL; 404 for an unknown node, 503 for an offline one', async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    const seen: { user?: string; base?: string; path?: string } = {};
    const n = await node('fw-1', {
      onRequest: (req, reply) => {
        Object.assign(seen, { user: req.head.user, base: req.head.base_url, path: req.head.path });
        // A header of the node's own is not passed on (only the content's: docs/farm.md, "What a node can do to the portal").
        reply.head(200, { 'content-type': 'image/png', 'content-length': String(png.length), 'x-node-header': 'mine' });
        reply.chunk(png);
        reply.end();
      },
    });
    const r = await call(alice, '/api/v2/nodes/fw-1/screenshot.png?x=1');
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-type')).to.equal('image/png');
    expect(r.headers.get('content-length')).to.equal(String(png.length));
    expect(r.headers.get('x-node-header')).to.equal(null);
    expect(seen).to.deep.equal({ user: 'alice', base: t.portal.url, path: '/api/v2/nodes/fw-1/screenshot.png?x=1' });
    expect(Buffer.from(await r.arrayBuffer())).to.deep.equal(png);

    const unknown = await call(alice, '/api/v2/nodes/ghost/thumbnail.jpg');
    expect(unknown.status).to.equal(404);
    expect((await json(unknown)).error).to.equal('not_found');

    await t.registerNode('fw-off');
    const off = await call(alice, '/api/v2/nodes/fw-off/screenshot.png');
    expect(off.status).to.equal(503);
    expect(await json(off)).to.deep.include({ error: 'device_unavailable' });

    await n.close();
    await waitFor(() => t.portal.hub.link('fw-1')?.online === false, WAIT);
    const gone = await call(alice, '/api/v2/nodes/fw-1/screenshot.png');
    expect(gone.status).to.equal(503);
    expect((await json(gone)).message).to.match(/offline \(connection closed\)/);
  });

  it('run_tests: 400 without node_id, 404 unknown node, 403 when another user holds the reservation; forwarded with its body otherwise', async () => {
    const n = await node('rt-1', {
      onRequest: (req, reply) => {
        reply.head(200, { 'content-type': 'application/json' });
        reply.chunk(Buffer.from(JSON.stringify({ got: JSON.parse(req.body.toString('utf8')) as unknown, user: req.head.user })));
        reply.end();
      },
    });
    const post = (token: string, body: unknown, p = '/api/v2/run_tests') => call(token, p, { method: 'POST', body: JSON.stringify(body) });
    let r = await post(alice, { test_cases: ['a'] });
    expect([r.status, (await json(r)).error]).to.deep.equal([400, 'invalid_request']);
    r = await post(alice, { node_id: 'nope', test_cases: ['a'] });
    expect([r.status, (await json(r)).error]).to.deep.equal([404, 'not_found']);
    reservations.held.set('rt-1', { reservation_id: 9, node_id: 'rt-1', username: 'alice', start_time: '2026-11-24T00:00:00.000Z', expires: null, message: 'soak', ended: false, lease_secs: null });
    r = await post(bob, { node_id: 'rt-1', test_cases: ['a'] });
    expect([r.status, (await json(r)).error]).to.deep.equal([403, 'forbidden']);
    r = await post(bob, { key: 'KEY_OK' }, '/api/v2/nodes/rt-1/press');
    expect(r.status).to.equal(403);
    r = await post(bob, {}, '/api/v2/jobs/rt-1/abcd/1/stop');
    expect(r.status).to.equal(403);
    expect(n.requests).to.have.length(0);
    r = await post(alice, { node_id: 'rt-1', test_cases: ['a'] });
    expect(r.status).to.equal(200);
    expect(await json(r)).to.deep.equal({ got: { node_id: 'rt-1', test_cases: ['a'] }, user: 'alice' });
  });

  it('test_case_names goes to any connected node, 503 when none is', async () => {
    let r = await call(alice, '/api/v2/test_pack/main/test_case_names');
    expect([r.status, (await json(r)).error]).to.deep.equal([503, 'device_unavailable']);
    await node('tp-1', {
      onRequest: (req, reply) => {
        reply.head(200, { 'content-type': 'application/json' });
        reply.chunk(Buffer.from(JSON.stringify([req.head.path])));
        reply.end();
      },
    });
    r = await call(alice, '/api/v2/test_pack/main/test_case_names');
    expect(await r.json()).to.deep.equal(['/api/v2/test_pack/main/test_case_names']);
  });

  it('a job is answered from PostgreSQL while its node is offline; a client leaving a forwarded long poll cancels it at the node', async function () {
    // Not through replicas: a client leaving through HAProxy does not end the replica's request (docs/testing.md).
    if (throughReplicas() > 0) this.skip();
    const n = await node('job-1', { onRequest: () => undefined }); // holds every request, as a long poll does
    const uid = '/job-1/beef/3';
    n.event({
      id: 'x-1',
      type: 'job.started',
      time: new Date().toISOString(),
      data: { node_id: 'job-1', job_uid: uid, username: 'alice', test_cases: ['t'], test_pack_sha: 'a'.repeat(40), test_pack_branch: null, category: 'c', soak: 'none', remote_control: null, tags: {}, start_time: '2026-11-24T01:00:00.000Z' },
    });
    await waitFor(async () => (await t.portal.jobs.get(uid))?.state === 'running', WAIT);

    // Online: forwarded. The node holds it; the client gives up; the node is told.
    const ac = new AbortController();
    const held = call(alice, `/api/v2/jobs${uid}/await_completion`, { signal: ac.signal }).catch((e: unknown) => e);
    const req = await waitFor(() => n.requests[0], WAIT);
    ac.abort();
    await held;
    await waitFor(() => n.cancelled.has(req.id), { what: 'the stream reset at the node', ...WAIT });

    n.kill();
    await waitFor(async () => (await t.portal.jobs.get(uid))?.state === 'exited', WAIT);
    const r = await call(alice, `/api/v2/jobs${uid}`);
    expect(r.status).to.equal(200);
    expect(await json(r)).to.deep.include({ job_uid: uid, job_url: `${t.portal.url}/api/v2/jobs${uid}`, status: 'exited', start_time: '2026-11-24T01:00:00.000Z' });
    const done = await call(alice, `/api/v2/jobs${uid}/await_completion`);
    expect(done.status).to.equal(200);
    expect((await json(done)).status).to.equal('exited');
    const missing = await call(alice, '/api/v2/jobs/job-1/beef/99');
    expect([missing.status, (await json(missing)).error]).to.deep.equal([404, 'not_found']);
  });
});

describe('farm portal config', () => {
  const write = (o: unknown) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'portal-cfg-'));
    const f = path.join(dir, 'portal.json');
    writeFileSync(f, typeof o === 'string' ? o : JSON.stringify(o));
    return { f, dir };
  };

  it('fills defaults, and resolves storage_dir beside the file', () => {
    const { f, dir } = write({ database: 'postgresql:///farm?host=/run/postgresql', storage_dir: 'store' });
    const cfg = loadPortalConfig(f);
    expect(cfg).to.deep.include({ listen: '0.0.0.0:8080', heartbeat_secs: 5, flush_secs: 30, storage_dir: path.join(dir, 'store') });
    expect(cfg.events.buffer_size).to.equal(1000);
    expect(cfg.webhooks.endpoints).to.deep.equal([]);
  });

  it('lists every problem at once', () => {
    const { f } = write({ listen: 'nowhere', heartbeat_secs: -1, extra: true, webhooks: { endpoints: [{ url: 'ftp://x', secret: 'no' }] } });
    let err: unknown;
    try {
      loadPortalConfig(f);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    const problems = (err as ConfigError).problems.join('\n');
    for (const p of ['listen:', 'database:', 'storage_dir:', 'heartbeat_secs:', 'extra', 'webhooks.endpoints.0.url', 'webhooks.endpoints.0.secret']) expect(problems).to.contain(p);
    expect(() => loadPortalConfig(write('{not json').f)).to.throw(ConfigError, /not valid JSON/);
  });

  it('farmhand portal: 64 without --config, 78 (EX_CONFIG) with every problem of a bad config', async () => {
    const cli = (argv: string[]) => runCaptured((a, out, err) => runCli(a, { out, err }, { serve: () => Promise.resolve(0) }), argv);
    const usage = await cli(['portal']);
    expect(usage.code).to.equal(64);
    expect(usage.err).to.contain('--config');
    const bad = await cli(['portal', '--config', write({ heartbeat_secs: 0 }).f]);
    expect(bad.code).to.equal(78);
    expect(bad.err).to.contain('database:').and.to.contain('storage_dir:').and.to.contain('heartbeat_secs:');
  });
});
