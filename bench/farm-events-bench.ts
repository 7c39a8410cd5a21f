/**
 * The farm's events: `node --import tsx bench/farm-events-bench.ts [--clients N] [--events N] [--latency N]`.
 *
 * A throwaway PostgreSQL cluster (test/helpers/postgres.ts), two "portals" in this process, each
 * with its own pool: one appends (PgEventLog), the other listens (OutboxListener) and serves the
 * farm's GET /api/v2/events (EventStream over the outbox) on loopback to `--clients` (default 20)
 * SSE clients. Prints:
 *   - append throughput: `--events` (default 5,000) appends issued at once (group commit: those
 *     waiting for the outbox lock go in one INSERT), and one at a time (each awaited: a commit each);
 *   - relayed node events: `--events` events of 10 nodes handed to the writer at once as the portal's hub
 *     does (attach), stored with each node's cursor moved in the same transaction (at least once
 *     delivery, docs/farm.md "The outbox"), against the same number of the hub's own events (no cursor),
 *     each timed until the listener has read them all;
 *   - end to end latency: `--latency` (default 200) appends one at a time, each timed from the
 *     append call to its arrival at every SSE client (median, p90, max over all clients).
 * No targets: the issue sets none for events; the numbers are for comparison between runs.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import pg from 'pg';
import { migrate } from '../src/farm/db/migrate.js';
import type { FarmEvent } from '../src/core/events.js';
import type { EventOrigin } from '../src/farm/contract.js';
import { OutboxListener, PgEventLog, farmStreamSource } from '../src/farm/events.js';
import { EventStream } from '../src/http/events.js';
import { silentLogger } from '../src/logger.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { formatSummary, summarize } from './lib/stats.js';

const arg = (name: string, dflt: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt);
const CLIENTS = arg('--clients', 20);
const EVENTS = arg('--events', 5000);
const LATENCY = arg('--latency', 200);

const made = (i: number, sent: number) => ({ reservation_id: i, username: 'bench', start_time: '2030-01-01T10:00:00.000Z', expires: null, message: String(sent) });

/** A minimal SSE reader: calls `on` with each event's data (JSON) as it arrives. */
function sse(url: string, on: (data: { data: { message: string; reservation_id: number } }) => void): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { Accept: 'text/event-stream' } }, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const line = block.split('\n').find((l) => l.startsWith('data: '));
          if (line) on(JSON.parse(line.slice(6)) as { data: { message: string; reservation_id: number } });
        }
      });
      resolve(req);
    });
    req.on('error', reject);
  });
}

async function main(): Promise<void> {
  const pgs = await startPostgres();
  const pools: pg.Pool[] = [];
  const pool = () => {
    const p = new pg.Pool({ host: pgs.host, port: pgs.port, user: pgs.user, database: pgs.database, max: 4 });
    pools.push(p);
    return p;
  };
  try {
    await migrate(pool());
    const writer = new PgEventLog({ pool: pool(), logger: silentLogger, pruneIntervalMs: 0, keepRows: 1_000_000 });
    const reader = pool();
    const listener = new OutboxListener({ pool: reader, logger: silentLogger });
    await listener.start();
    const stream = new EventStream(farmStreamSource(listener), { maxClients: CLIENTS + 1, heartbeatMs: 15_000, maxBacklogBytes: 64 << 20, logger: silentLogger });
    const app = new Koa();
    app.use(stream.router().routes());
    const server = http.createServer(app.callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v2/events`;

    // Latency: arrivals per event id, per client.
    const arrivals = new Map<number, number[]>();
    const reqs = await Promise.all(
      Array.from({ length: CLIENTS }, () =>
        sse(url, (e) => {
          const at = performance.now();
          const sent = Number(e.data.message);
          if (sent > 0) (arrivals.get(e.data.reservation_id) ?? arrivals.set(e.data.reservation_id, []).get(e.data.reservation_id)!).push(at - sent);
        }),
      ),
    );

    // Throughput, all at once (group commit).
    let t0 = performance.now();
    await Promise.all(Array.from({ length: EVENTS }, (_, i) => writer.append('reservation.made', 'bench-node', made(-1 - i, 0))));
    let s = (performance.now() - t0) / 1000;
    console.log(`append, ${EVENTS} issued at once: ${s.toFixed(2)} s, ${Math.round(EVENTS / s)} events/s`);
    const seqAll = listener.last;
    await listener.waitFor(seqAll);

    // Throughput, one at a time.
    const one = Math.min(EVENTS, 1000);
    t0 = performance.now();
    for (let i = 0; i < one; i++) await writer.append('reservation.made', 'bench-node', made(-100000 - i, 0));
    s = (performance.now() - t0) / 1000;
    console.log(`append, ${one} one at a time: ${s.toFixed(2)} s, ${Math.round(one / s)} events/s (${((s * 1000) / one).toFixed(2)} ms each)`);

    // Relayed events, as the hub hands them: the node's own (moving its cursor) against the hub's own (no cursor).
    const listeners = new Set<(e: FarmEvent, from?: EventOrigin) => void>();
    writer.attach({ onEvent: (fn) => (listeners.add(fn), () => listeners.delete(fn)) });
    const relay = async (from: EventOrigin, boot: string) => {
      const before = listener.published;
      const t = performance.now();
      for (let i = 1; i <= EVENTS; i++) {
        const node = `bench-${i % 10}`;
        const e = { id: `${boot}-${i}`, type: 'key.pressed', time: '2030-01-01T10:00:00.000Z', data: { node_id: node, key: 'KEY_OK', remote: 'r', hold_ms: 0, source: 'api', username: 'bench', result_id: null } } as FarmEvent;
        for (const fn of listeners) fn(e, from);
      }
      while (listener.published - before < EVENTS) await new Promise((r) => setTimeout(r, 2));
      return (performance.now() - t) / 1000;
    };
    // Twice each, alternated, so neither side gets the warm-up alone.
    let own = 0;
    let nodes = 0;
    for (const round of [1, 2]) {
      own += await relay('portal', `p${round}`);
      nodes += await relay('node', `n${round}`);
    }
    own /= 2;
    nodes /= 2;
    const { rows: cursors } = await reader.query<{ n: string }>('SELECT count(*) AS n FROM node_event_cursors');
    console.log(
      `relayed, ${EVENTS} at once, read back by the listener (mean of 2 alternated rounds): the hub's own ${own.toFixed(2)} s (${Math.round(EVENTS / own)} events/s); ` +
        `the nodes' own, cursors moved ${nodes.toFixed(2)} s (${Math.round(EVENTS / nodes)} events/s), ratio ${(nodes / own).toFixed(2)}; ${cursors[0]!.n} cursors`,
    );

    // End to end latency, append call -> each SSE client.
    for (let i = 1; i <= LATENCY; i++) {
      await writer.append('reservation.made', 'bench-node', made(i, performance.now()));
      const deadline = Date.now() + 30_000;
      while ((arrivals.get(i)?.length ?? 0) < CLIENTS) {
        if (Date.now() > deadline) throw new Error(`event ${i} did not reach every client within 30 s`);
        await new Promise((r) => setImmediate(r));
      }
    }
    const lat = [...arrivals.values()].flat();
    console.log(`end to end (append -> ${CLIENTS} SSE clients), ${LATENCY} events: ${formatSummary(summarize(lat), 'ms')}`);

    for (const r of reqs) r.destroy();
    stream.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await listener.close();
    await writer.close();
  } finally {
    for (const p of pools) await p.end();
    await pgs.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(2);
});
