// A dispatcher in a process of its own, for test/farm/queue.test.ts ("a dispatcher killed between claim and start"):
// every node it is given is free, and its starts never finish: it prints `starting <queue_id> <node> <key>` and hangs
// there, holding the claim, until the test SIGKILLs it. argv: the connection string, then the node ids.
import pg from 'pg';
import { QueueDispatcher } from '../../src/farm/queue/dispatcher.js';
import { PgJobQueue } from '../../src/farm/queue/store.js';

const [conninfo, ...nodes] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: conninfo, max: 4 });
const dispatcher = new QueueDispatcher({
  pool,
  queue: new PgJobQueue(pool),
  nodes: { availability: () => Promise.resolve(new Map(nodes.map((n) => [n, { kind: 'available' as const, detail: null }]))) },
  starter: {
    start: (req) => {
      process.stdout.write(`starting ${req.queueId} ${req.nodeId} ${req.key}\n`);
      return new Promise(() => undefined);
    },
  },
  pollMs: 200,
  startTimeoutMs: 600_000,
});
dispatcher.start();
process.stdout.write('ready\n');
