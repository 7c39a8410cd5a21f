/**
 * Push events: `node --import tsx bench/events-bench.ts [--clients N] [--events N]`.
 *
 * In one process, on loopback: the event stream (`src/http/events.ts` in a bare Koa app) with
 * `--clients` (default 50) SSE clients reading, and a webhook endpoint (`src/notify/webhooks.ts`)
 * with a receiver that answers 200. `--events` (default 2,000) run.finished-sized events are published
 * in bursts of 100, yielding between bursts as a daemon does between runs.
 *   - the cost of one `publish()` to the publisher (the job loop): median <= 0.5 ms with every client;
 *   - every client has every event: within 15 s of the first publish (a node publishes a few events a
 *     second at most; 2,000 x 50 is 100,000 messages, the clients parsing them in the same process);
 *   - every event delivered to the webhook receiver, signed, one at a time: within 60 s (>= 33 a second).
 * Exit status: 0 all targets met, 1 a target missed, 2 the benchmark failed.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import Koa from 'koa';
import { EventHub } from '../src/core/events.js';
import { EventStream } from '../src/http/events.js';
import { silentLogger } from '../src/logger.js';
import { WebhookDispatcher } from '../src/notify/webhooks.js';
import { formatSummary, summarize, Targets } from './lib/stats.js';

const arg = (name: string, dflt: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt);
const CLIENTS = arg('--clients', 50);
const EVENTS = arg('--events', 2000);
const targets = new Targets();

const listen = (server: http.Server) => new Promise<string>((r) => server.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
const until = async (cond: () => boolean, limitMs: number) => {
  const end = performance.now() + limitMs;
  while (!cond() && performance.now() < end) await new Promise((r) => setTimeout(r, 2));
  return cond();
};

async function main(): Promise<void> {
  const hub = new EventHub({ nodeId: 'bench', bufferSize: EVENTS });
  // Every client is anonymous and from one address: the shares per caller are lifted for the bench.
  const stream = new EventStream(hub, { maxClients: CLIENTS + 1, maxPerCaller: CLIENTS + 1, maxAnonymous: CLIENTS + 1, heartbeatMs: 15_000, maxBacklogBytes: 64 << 20 });
  const app = new Koa();
  app.use(stream.router().routes());
  const server = http.createServer(app.callback());
  const url = await listen(server);

  let delivered = 0;
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      delivered++;
      res.writeHead(200).end();
    });
  });
  const hookUrl = await listen(receiver);
  const webhooks = new WebhookDispatcher({
    settings: { endpoints: [{ url: hookUrl, secret: `whsec_${randomBytes(32).toString('base64')}` }], max_attempts: 3, backoff_initial_ms: 10, backoff_max_ms: 100, timeout_secs: 10, queue_size: EVENTS },
    userAgent: 'farmhand/bench',
    logger: silentLogger,
  });
  webhooks.attach(hub);

  // Clients count the events they receive (one `id:` line each).
  const received = new Array<number>(CLIENTS).fill(0);
  const requests: http.ClientRequest[] = [];
  await Promise.all(
    received.map(
      (_, i) =>
        new Promise<void>((resolve, reject) => {
          const req = http.get(`${url}/api/v2/events`, (res) => {
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (received[i]! += chunk.split('\nid: ').length - 1 + (chunk.startsWith('id: ') ? 1 : 0)));
            resolve();
          });
          req.on('error', reject);
          requests.push(req);
        }),
    ),
  );
  await until(() => stream.clientsConnected === CLIENTS, 5000);

  const data = {
    job_uid: '/bench/0000/1',
    result_id: '/bench/0000/1/2030-01-01_10.00.01',
    test_case: 'tests/menu.py::test_open_the_main_menu_and_check_every_entry',
    result: 'fail' as const,
    failure_reason: 'UITestFailure: the menu did not appear within 10 s',
    infrastructure_error: null,
    start_time: '2030-01-01T10:00:01.000Z',
    end_time: '2030-01-01T10:00:03.120Z',
    duration: 2.12,
  };
  const publishMs: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < EVENTS; i++) {
    const t = performance.now();
    hub.publish('run.finished', data);
    publishMs.push(performance.now() - t);
    if (i % 100 === 99) await new Promise((r) => setImmediate(r));
  }
  const allStream = await until(() => received.every((n) => n >= EVENTS), 30_000);
  const streamMs = performance.now() - t0;
  const allHooks = await until(() => delivered >= EVENTS, 60_000);
  const hookMs = performance.now() - t0;

  const p = summarize(publishMs);
  targets.check(`publish() with ${CLIENTS} stream clients and 1 webhook`, p.median, '<=', 0.5, 'ms', formatSummary(p, 'ms', 3));
  if (!allStream) throw new Error(`clients got ${Math.min(...received)} of ${EVENTS} events`);
  targets.check(`${EVENTS} events to all ${CLIENTS} clients`, streamMs, '<=', 15_000, 'ms', `${Math.round(streamMs)} ms from the first publish`);
  if (!allHooks) throw new Error(`the webhook receiver got ${delivered} of ${EVENTS} events`);
  targets.check(`${EVENTS} signed webhook deliveries, one at a time`, hookMs, '<=', 60_000, 'ms', `${Math.round(hookMs)} ms from the first publish`);
  console.log(`webhook deliveries: ${JSON.stringify(webhooks.deliveries())}; stream clients dropped: ${stream.clientsDropped}`);

  webhooks.close();
  stream.close();
  for (const r of requests) r.destroy();
  server.closeAllConnections();
  receiver.closeAllConnections();
  await Promise.all([new Promise((r) => server.close(r)), new Promise((r) => receiver.close(r))]);
  targets.printSummary();
  process.exitCode = targets.missed.length ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
