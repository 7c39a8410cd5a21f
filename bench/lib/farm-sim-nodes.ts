/**
 * Child process of bench/farm-heartbeat-bench.ts: simulated nodes (raw
 * WebSocket clients speaking the real protocol, test/helpers/farmNodes.ts),
 * kept out of the portal's process so its CPU is the portal's alone. Told the
 * portal and the nodes over IPC; answers 'ready' once every node was welcomed,
 * to 'count' the number of heartbeats sent so far.
 */
import { SimNode } from '../../test/helpers/farmNodes.js';

interface Start {
  url: string;
  nodes: { id: string; credential: string }[];
  intervalSecs: number;
}

let sims: SimNode[] = [];
let sent = 0;
let timers: NodeJS.Timeout[] = [];

process.on('message', (m: { t: 'start'; start: Start } | { t: 'count' } | { t: 'stop' }) => {
  if (m.t === 'start') void start(m.start);
  else if (m.t === 'count') process.send!({ t: 'count', heartbeats: sent });
  else {
    for (const t of timers) clearInterval(t);
    for (const s of sims) s.kill();
    process.send!({ t: 'stopped', heartbeats: sent }, () => process.exit(0));
  }
});

async function start(s: Start): Promise<void> {
  sims = s.nodes.map((n) => new SimNode({ portalUrl: s.url, nodeId: n.id, credential: n.credential }));
  await Promise.all(sims.map((n) => n.connect()));
  while (sims.some((n) => !n.welcome)) await new Promise((r) => setTimeout(r, 50));
  // Spread over the interval, as real nodes started at different times are.
  timers = sims.map((n, i) => {
    const t = setTimeout(() => {
      timers.push(
        setInterval(() => {
          n.heartbeat();
          sent++;
        }, s.intervalSecs * 1000),
      );
    }, (i * s.intervalSecs * 1000) / sims.length);
    return t;
  });
  process.send!({ t: 'ready' });
}
