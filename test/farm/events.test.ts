/**
 * The farm's events against a real throwaway PostgreSQL cluster: the outbox
 * written by two portals and read in seq order by a third, node events relayed
 * from a hub (stored once), the farm-wide SSE stream on a real HTTP server
 * (live, resume with Last-Event-ID, missed and bad ids), the LISTEN connection
 * killed and re-established without losing what was appended meanwhile,
 * retention, and webhooks fed from the outbox (retries, signatures, the cursor
 * across a portal restart).
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import type { FarmEvent } from '../../src/core/events.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { OutboxListener, PgEventLog, farmStreamSource } from '../../src/farm/events.js';
import { FarmWebhooks } from '../../src/farm/webhooks.js';
import type { FarmHub } from '../../src/farm/contract.js';
import { EventStream } from '../../src/http/events.js';
import { errorHandler } from '../../src/http/errors.js';
import { silentLogger } from '../../src/logger.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const made = (id: number) => ({ reservation_id: id, username: 'alice', start_time: '2030-01-01T10:00:00.000Z', expires: null, message: `r${id}` });

/** A FarmHub stand-in with only onEvent (hA's hub delivers the nodes' events the same way). */
class HubStandIn implements Pick<FarmHub, 'onEvent'> {
  private readonly fns = new Set<(e: FarmEvent) => void>();
  onEvent(fn: (e: FarmEvent) => void): () => void {
    this.fns.add(fn);
    return () => this.fns.delete(fn);
  }
  emit(e: FarmEvent): void {
    for (const f of this.fns) f(e);
  }
}

describe('farm events: the outbox, the stream and the webhooks', function () {
  this.timeout(60_000);
  let pgs: TestPostgres;
  const pools: pg.Pool[] = [];
  const cleanups: Array<() => unknown> = [];
  const newPool = () => {
    const p = new pg.Pool({ host: pgs.host, port: pgs.port, user: pgs.user, database: pgs.database, max: 4 });
    pools.push(p);
    return p;
  };
  /** A "portal": its own pool, writer and listener. */
  const portal = async (o: { keepRows?: number; connect?: () => Promise<pg.Client> } = {}) => {
    const pool = newPool();
    const log = new PgEventLog({ pool, logger: silentLogger, keepRows: o.keepRows, pruneIntervalMs: 0 });
    const listener = new OutboxListener({ pool, logger: silentLogger, retryInitialMs: 20, retryMaxMs: 200, connect: o.connect });
    await listener.start();
    cleanups.push(() => log.close(), () => listener.close());
    return { pool, log, listener };
  };
  const collect = (l: OutboxListener) => {
    const got: FarmEvent[] = [];
    const sub = l.subscribe((e) => got.push(e));
    cleanups.push(() => sub.close());
    return got;
  };

  before(async () => {
    pgs = await startPostgres();
    await migrate(newPool());
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  after(async () => {
    for (const p of pools) await p.end().catch(() => undefined);
    await pgs?.stop();
  });

  it('appends from two portals reach a third in seq order, each with its node_id', async () => {
    const [a, b, c] = [await portal(), await portal(), await portal()];
    const got = collect(c.listener);
    const start = c.listener.last;
    const writes: Promise<void>[] = [];
    for (let i = 1; i <= 40; i++) writes.push((i % 2 ? a : b).log.append('reservation.made', `node-${i % 2 ? 'a' : 'b'}`, made(i)));
    await Promise.all(writes);
    await waitFor(() => got.length === 40, 'the third portal to read all 40');
    const seqs = got.map((e) => Number(e.id));
    expect(seqs[0]).to.be.greaterThan(start);
    expect(seqs, 'strictly increasing').to.deep.equal([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).to.equal(40);
    // Each writer's own appends keep their order.
    const ofA = got.filter((e) => e.data.node_id === 'node-a').map((e) => (e.data as { reservation_id: number }).reservation_id);
    expect(ofA).to.deep.equal(ofA.slice().sort((x, y) => x - y));
    const first = got[0]!;
    expect(first.type).to.equal('reservation.made');
    expect(Object.keys(first.data)[0], 'node_id first, as on a node').to.equal('node_id');
    expect(Date.parse(first.time)).to.be.a('number').and.not.NaN;
  });

  it('appendIn: an event written in a transaction is read only once it commits; a rollback leaves none', async () => {
    const w = await portal();
    const r = await portal();
    const got = collect(r.listener);
    const client = await w.pool.connect();
    try {
      await client.query('BEGIN');
      const [seq] = await w.log.appendIn(client, [{ type: 'reservation.made', nodeId: 'n1', data: made(7) }]);
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      const [seq2] = await w.log.appendIn(client, [{ type: 'reservation.made', nodeId: 'n1', data: made(8) }]);
      expect(seq2).to.be.greaterThan(seq!);
      // Another append meanwhile (a later seq) waits for the outbox lock, so it cannot commit first
      // and be read before seq2, which a reader would then skip.
      let settled = false;
      const later = w.log.append('reservation.made', 'n2', made(9)).finally(() => (settled = true));
      await waitFor(async () => {
        const { rows } = await r.pool.query<{ n: string }>("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
        return (settled && got.length > 0) || Number(rows[0]!.n) > 0; // without the lock: 9 committed and read first
      }, 'the other append to wait for the lock');
      await client.query('COMMIT');
      await later;
    } finally {
      client.release();
    }
    await waitFor(() => got.length >= 2, 'both committed events');
    expect(got.map((e) => (e.data as { reservation_id: number }).reservation_id)).to.deep.equal([8, 9]);
  });

  it('relays a hub\'s node events with their time; one sent twice is stored once', async () => {
    const w = await portal();
    const r = await portal();
    const got = collect(r.listener);
    const hub = new HubStandIn();
    cleanups.push(w.log.attach(hub));
    const e1 = { id: 'mwtp-1', type: 'node.offline', time: '2030-01-01T10:00:00.000Z', data: { node_id: 'n9', online: false, reason: 'capture stopped' } } as FarmEvent;
    const e2 = { id: 'mwtp-2', type: 'node.online', time: '2030-01-01T10:00:05.000Z', data: { node_id: 'n9', online: true, reason: null } } as FarmEvent;
    hub.emit(e1);
    hub.emit(e1); // the node's link re-sent it
    hub.emit(e2);
    await waitFor(() => got.length === 2 && w.log.pending === 0, 'both events');
    expect(got.map((e) => [e.type, e.time, e.data])).to.deep.equal([
      ['node.offline', e1.time, e1.data],
      ['node.online', e2.time, e2.data],
    ]);
    const { rows } = await w.pool.query<{ n: string }>("SELECT count(*) AS n FROM events_outbox WHERE node_event_id LIKE 'mwtp-%'");
    expect(Number(rows[0]!.n)).to.equal(2);
  });

  describe('GET /api/v2/events on the farm', () => {
    let server: http.Server;
    let url: string;
    let p: Awaited<ReturnType<typeof portal>>;
    let stream: EventStream;
    const clients: SseClient[] = [];
    const open = async (headers: Record<string, string> = {}, query = '') => {
      const c = await SseClient.open(`${url}/api/v2/events${query}`, headers);
      clients.push(c);
      return c;
    };

    beforeEach(async () => {
      p = await portal({ keepRows: 5 });
      stream = new EventStream(farmStreamSource(p.listener), { maxClients: 8, heartbeatMs: 15_000, maxBacklogBytes: 1 << 20, logger: silentLogger });
      const app = new Koa();
      app.silent = true;
      app.use(errorHandler(silentLogger));
      app.use(stream.router().routes());
      server = http.createServer(app.callback());
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterEach(async () => {
      for (const c of clients.splice(0)) c.close();
      stream.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    it('streams live events and, after a disconnect, resumes with exactly the missed ones', async () => {
      const other = await portal(); // appends come from another portal
      const c1 = await open();
      expect(c1.res.statusCode).to.equal(200);
      expect(c1.res.headers['content-type']).to.match(/^text\/event-stream/);
      await other.log.append('reservation.made', 'n1', made(1));
      await other.log.append('reservation.made', 'n2', made(2));
      await waitFor(() => c1.of('reservation.made').length === 2, 'two live events');
      const [m1, m2] = c1.of('reservation.made');
      expect(m1!.id).to.equal((m1!.data as { id: string }).id);
      expect((m2!.data as { data: { node_id: string } }).data.node_id).to.equal('n2');
      c1.close();
      await waitFor(() => stream.clientsConnected === 0, 'the server to see the client go');
      for (const i of [3, 4, 5]) await other.log.append('reservation.made', 'n3', made(i));
      const c2 = await open({ 'Last-Event-ID': m2!.id! });
      await waitFor(() => c2.of('reservation.made').length === 3, 'the three missed events');
      await other.log.append('reservation.extended', 'n3', made(5));
      await waitFor(() => c2.messages.length === 4, 'the next live event');
      expect(c2.messages.map((m) => (m.data as { data: { message: string } }).data.message)).to.deep.equal(['r3', 'r4', 'r5', 'r5']);
      expect(c2.of('stream.missed')).to.have.length(0);
      const ids = c2.messages.map((m) => Number(m.id));
      expect(ids[0]).to.be.greaterThan(Number(m2!.id));
      expect(ids).to.deep.equal([...ids].sort((x, y) => x - y));
    });

    it('an id older than retention, or never written, starts with stream.missed; a malformed one is a 400', async () => {
      const seqs: number[] = [];
      for (let i = 1; i <= 8; i++) {
        await p.log.append('reservation.made', 'n1', made(i));
      }
      const { rows } = await p.pool.query<{ seq: string }>('SELECT seq FROM events_outbox ORDER BY seq DESC LIMIT 8');
      seqs.push(...rows.map((r) => Number(r.seq)).reverse());
      await p.log.prune(); // keeps the newest 5
      const old = await open({ 'Last-Event-ID': String(seqs[0]) });
      const missed = await old.next((m) => m.event === 'stream.missed', 'stream.missed');
      expect(missed.id).to.equal(undefined);
      expect(missed.data).to.include({ reason: 'too_old', last_event_id: String(seqs[0]), oldest_event_id: String(seqs[3]) });
      await waitFor(() => old.of('reservation.made').length === 5, 'every retained event');
      // An id at the edge of retention misses nothing.
      const edge = await open({}, `?last_event_id=${seqs[2]}`);
      await waitFor(() => edge.of('reservation.made').length === 5, 'the events after the edge');
      expect(edge.of('stream.missed')).to.have.length(0);
      const unknown = await open({ 'Last-Event-ID': '999999999' });
      const m2 = await unknown.next((m) => m.event === 'stream.missed', 'stream.missed');
      expect(m2.data.reason).to.equal('unknown_id');
      const bad = await open({ 'Last-Event-ID': 'mwtpcs5v-12' });
      expect(bad.res.statusCode).to.equal(400);
      expect(JSON.parse(await bad.text())).to.include({ error: 'invalid_request' });
    });
  });

  it('the farm stream answers 503 device_unavailable when the outbox cannot be read', async () => {
    const pool = newPool();
    const listener = new OutboxListener({ pool, logger: silentLogger });
    await listener.start();
    cleanups.push(() => listener.close());
    const stream = new EventStream(farmStreamSource(listener), { maxClients: 8, heartbeatMs: 15_000, maxBacklogBytes: 1 << 20, logger: silentLogger });
    const app = new Koa();
    app.silent = true;
    app.use(errorHandler(silentLogger));
    app.use(stream.router().routes());
    const server = http.createServer(app.callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => server.close(r)));
    await pool.end(); // the store is gone
    const c = await SseClient.open(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v2/events`, { 'Last-Event-ID': '1' });
    expect(c.res.statusCode).to.equal(503);
    expect(JSON.parse(await c.text())).to.include({ error: 'device_unavailable' });
    expect(stream.clientsConnected).to.equal(0);
  });

  it('the LISTEN connection killed: events appended meanwhile are delivered after it reconnects', async () => {
    // The second connection waits at a gate the test opens, so the appends below surely fall in the outage.
    let calls = 0;
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const connectArgs: pg.ClientConfig = { host: pgs.host, port: pgs.port, user: pgs.user, database: pgs.database };
    const reader = await portal({
      connect: async () => {
        if (++calls > 1) await gate;
        const c = new pg.Client(connectArgs);
        await c.connect();
        return c;
      },
    });
    const writer = await portal();
    const got = collect(reader.listener);
    await writer.log.append('reservation.made', 'n1', made(1));
    await waitFor(() => got.length === 1, 'the first event');
    const pid = reader.listener.listenerPid;
    expect(pid).to.be.a('number');
    await writer.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(() => calls === 2, 'the listener to try to reconnect');
    for (const i of [2, 3, 4]) await writer.log.append('reservation.made', 'n1', made(i));
    expect(got).to.have.length(1);
    open();
    await waitFor(() => got.length === 4, 'the events appended during the outage');
    expect(got.map((e) => (e.data as { reservation_id: number }).reservation_id)).to.deep.equal([1, 2, 3, 4]);
    expect(reader.listener.reconnects).to.equal(1);
    expect(reader.listener.listenerPid).to.be.a('number').and.not.equal(pid);
    await writer.log.append('reservation.made', 'n1', made(5));
    await waitFor(() => got.length === 5, 'live again after the reconnect');
  });

  it('webhooks: a receiver that fails twice then accepts gets three signed deliveries; a restarted portal resumes after its cursor', async () => {
    const hook = await receiver(2);
    cleanups.push(hook.close);
    const w = await portal();
    const settings = { endpoints: [{ url: hook.url, secret: SECRET }], max_attempts: 5, backoff_initial_ms: 1, backoff_max_ms: 4, timeout_secs: 10, queue_size: 100 };
    const start = async () => {
      const r = await portal();
      const hooks = new FarmWebhooks({ pool: r.pool, listener: r.listener, settings, userAgent: 'farmhand/test', logger: silentLogger, saveEveryMs: 50 });
      await hooks.start();
      return hooks;
    };
    const h1 = await start();
    await w.log.append('reservation.made', 'n1', made(1));
    await waitFor(() => h1.deliveries().delivered === 1, 'the delivery');
    expect(h1.deliveries()).to.deep.equal({ delivered: 1, failed_attempts: 2, abandoned: 0, dropped: 0 });
    expect(hook.got.map((g) => g.status)).to.deep.equal([500, 500, 200]);
    const ids = new Set(hook.got.map((g) => g.headers['webhook-id']));
    expect(ids.size).to.equal(1);
    for (const g of hook.got) expect(() => new Webhook(SECRET).verify(g.body, g.headers as Record<string, string>)).to.not.throw();
    const ce = JSON.parse(hook.got[0]!.body) as Record<string, unknown>;
    expect(ce).to.include({ specversion: '1.0', type: 'farmhand.reservation.made', source: 'urn:farmhand:node:n1', subject: 'reservation/1', id: [...ids][0] });
    await h1.close(); // the portal stops; an event comes while it is down
    await w.log.append('reservation.ended', 'n1', { ...made(1), how: 'ended', by: 'alice', end_message: null, end_time: '2030-01-01T11:00:00.000Z' });
    const h2 = await start();
    cleanups.push(() => h2.close());
    await waitFor(() => h2.deliveries().delivered === 1, 'the event appended while down');
    expect(hook.got.map((g) => (JSON.parse(g.body) as { type: string }).type)).to.deep.equal([
      'farmhand.reservation.made',
      'farmhand.reservation.made',
      'farmhand.reservation.made',
      'farmhand.reservation.ended',
    ]);
    await waitFor(async () => {
      const { rows } = await w.pool.query<{ seq: string }>("SELECT seq FROM events_cursors WHERE name = 'webhooks'");
      return Number(rows[0]!.seq) === h2.through && h2.queued === 0;
    }, 'the cursor to be saved');
  });
  it('webhooks with two portals: one delivers, the other takes over from the cursor when it stops ("exactly once across a clean stop")', async () => {
    // The first delivery is still unanswered when its portal stops: the stop waits for the answer, so
    // the cursor moves past it and the standby does not send it again.
    const hook = await receiver(0, true);
    cleanups.push(hook.close);
    const w = await portal();
    const settings = { endpoints: [{ url: hook.url, secret: SECRET }], max_attempts: 5, backoff_initial_ms: 1, backoff_max_ms: 4, timeout_secs: 10, queue_size: 100 };
    const start = async () => {
      const r = await portal();
      const hooks = new FarmWebhooks({ pool: r.pool, listener: r.listener, settings, userAgent: 'farmhand/test', logger: silentLogger, cursor: 'webhooks-2', saveEveryMs: 50, standbyMs: 50 });
      cleanups.push(() => hooks.close());
      await hooks.start();
      return hooks;
    };
    const [h1, h2] = [await start(), await start()];
    expect([h1.leading, h2.leading]).to.deep.equal([true, false]);
    await w.log.append('reservation.made', 'n1', made(1));
    await waitFor(() => hook.got.length === 1, 'the delivery to reach the receiver');
    const closed = h1.close();
    hook.release();
    await closed;
    expect(h1.deliveries().delivered).to.equal(1);
    await w.log.append('reservation.made', 'n1', made(2));
    await waitFor(() => h2.leading && hook.got.length >= 2, 'the standby to take over and deliver');
    // Another event, so a duplicate of the first two would have had time to arrive before it.
    await w.log.append('reservation.made', 'n1', made(3));
    await waitFor(() => hook.got.length >= 3, 'the third delivery');
    expect(hook.got.map((g) => (JSON.parse(g.body) as { data: { reservation_id: number } }).data.reservation_id)).to.deep.equal([1, 2, 3]);
  });
});

interface Delivery {
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
}

/**
 * A webhook receiver that answers 500 to the first `failures` requests, then 200. With `holdFirst`, the
 * first request is recorded at once but answered only at `release()`.
 */
async function receiver(failures: number, holdFirst = false) {
  const got: Delivery[] = [];
  let held: (() => void) | undefined;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = got.length < failures ? 500 : 200;
      const first = got.length === 0;
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status });
      if (first && holdFirst) held = () => res.writeHead(status).end();
      else res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    got,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    release: () => held?.(),
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

describe('farm events: the outbox writer after a database outage', function () {
  this.timeout(120_000);
  let own: TestPostgres;
  let pool: pg.Pool;
  let log: PgEventLog | undefined;

  before(async () => {
    own = await startPostgres();
    pool = new pg.Pool({ host: own.host, port: own.port, user: own.user, database: own.database, max: 2 });
    pool.on('error', () => undefined); // idle connections cut by the stop below
    await migrate(pool);
  });
  after(async () => {
    await log?.close();
    await pool?.end();
    await own?.stop();
  });

  it('a relayed event held by the outage is written once the pool connects again, without waiting out its back-off', async () => {
    // An hour's back-off: only the new connection can bring the write forward.
    log = new PgEventLog({ pool, logger: silentLogger, pruneIntervalMs: 0, retryInitialMs: 3_600_000, retryMaxMs: 3_600_000 });
    const hub = new HubStandIn();
    const detach = log.attach(hub);
    try {
      await own.stopServer('fast');
      hub.emit({ id: 'mwre-1', type: 'node.online', time: '2030-01-01T10:00:00.000Z', data: { node_id: 'n7', online: true, reason: null } });
      await waitFor(() => log!.retrying, 'the write to fail and wait out its back-off');
      await own.startServer();
      expect(log.pending, 'still held after the server is back').to.equal(1);
      await pool.query('SELECT 1'); // a new connection: the database answers again
      const rows = await waitFor(
        async () => {
          const r = await pool.query<{ type: string; node_id: string }>("SELECT type, node_id FROM events_outbox WHERE node_event_id = 'mwre-1'");
          return r.rows.length ? r.rows : undefined;
        },
        { what: 'the held event in the outbox', timeoutMs: 30_000 },
      );
      expect(rows).to.deep.equal([{ type: 'node.online', node_id: 'n7' }]);
      expect([log.pending, log.retrying]).to.deep.equal([0, false]);
    } finally {
      detach();
    }
  });
});
