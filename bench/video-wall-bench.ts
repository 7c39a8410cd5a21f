/**
 * The video wall's cost (docs/video-wall.md; issue 32: "<= 0.05 cores on each node, <= 0.3 cores on the portal").
 * `--nodes` (20) real `farmhand serve` processes on virtual boxes (bench/lib/daemon.ts, as live-view-bench.ts
 * starts them) joined to one portal (this process, on a throwaway PostgreSQL cluster); then two windows of
 * `--window` seconds (30):
 *
 * 1. idle: nothing watches the nodes;
 * 2. the wall: `/app/wall` open in a headless Chromium, every tile on screen (a viewport large enough).
 *
 * For each window: each node's CPU (its process tree, /proc) and the portal's (this process: process.cpuUsage();
 * it does nothing else meanwhile) in cores (CPU seconds per second). Printed: the idle figures, the wall's, and
 * the wall's minus idle (the wall's cost), against the targets; and the pictures the browser received.
 *
 *   node --import tsx bench/video-wall-bench.ts [--nodes 20] [--window 30]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { registerNode } from '../src/farm/nodeCredentials.js';
import { makeTestPack } from '../test/fixtures/testPack.js';
import { launchBrowser } from '../test/helpers/browser.js';
import { startTestFarm } from '../test/helpers/farm.js';
import { waitFor } from '../test/helpers/wait.js';
import { startBenchDaemon, writeDaemonConfig, type BenchDaemon } from './lib/daemon.js';
import { treeCpuSecs } from './lib/processes.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const NODES = arg('nodes', 20);
const WINDOW_S = arg('window', 30);
const NODE_TARGET = 0.05;
const PORTAL_TARGET = 0.3;

const work = mkdtempSync(join(tmpdir(), 'farmhand-wall-bench-'));
const farm = await startTestFarm();
const pack = await makeTestPack();
const daemons: { name: string; d: BenchDaemon }[] = [];

async function node(name: string): Promise<void> {
  const dir = join(work, name);
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const file = join(dir, 'credential');
  writeFileSync(file, (await registerNode(farm.db, name)) + '\n', { mode: 0o600 });
  const configFile = await writeDaemonConfig(dir, pack.dir, dataDir, {
    node_id: name,
    portal: { url: farm.url, node_credential_file: file },
    capture: { uri: 'virtual:', width: 1280, height: 720 },
    ir: { uri: 'virtual:' },
  });
  // The tests' config refreshes the test pack every second; a node refreshes far less often.
  const cfg = JSON.parse(readFileSync(configFile, 'utf8')) as { test_pack: { refresh_secs: number } };
  cfg.test_pack.refresh_secs = 300;
  writeFileSync(configFile, JSON.stringify(cfg, null, 2));
  const d = await startBenchDaemon({ configFile, logFile: join(dir, 'daemon.log'), probePath: '/readyz', timeoutMs: 180_000 });
  daemons.push({ name, d });
  await waitFor(() => farm.portal.hub.link(name)?.online && farm.portal.hub.link(name)?.snapshot, { what: `${name} on the portal`, timeoutMs: 120_000 });
}

/** CPU seconds of each node's tree and of the portal over `secs`, as cores. */
async function measure(secs: number): Promise<{ nodes: number[]; portal: number }> {
  const cpu = (pid: number) => {
    const t = treeCpuSecs(pid);
    return t.user + t.system;
  };
  const n0 = daemons.map((x) => cpu(x.d.pid));
  const p0 = process.cpuUsage();
  const t0 = performance.now();
  await delay(secs * 1000);
  const wall = (performance.now() - t0) / 1000;
  const p = process.cpuUsage(p0);
  return { nodes: daemons.map((x, i) => (cpu(x.d.pid) - n0[i]!) / wall), portal: (p.user + p.system) / 1e6 / wall };
}

const f3 = (x: number) => x.toFixed(3);
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `mean ${f3(s.reduce((a, b) => a + b, 0) / s.length)}, median ${f3(s[Math.floor(s.length / 2)]!)}, max ${f3(s[s.length - 1]!)}`;
};

try {
  console.log(`starting ${NODES} nodes (farmhand serve, virtual boxes at 1280x720) behind one portal ...`);
  for (let i = 0; i < NODES; i += 4) await Promise.all(Array.from({ length: Math.min(4, NODES - i) }, (_, k) => node(`wall-${String(i + k + 1).padStart(2, '0')}`)));
  // Let the start-up settle (test pack fetched, first snapshots sent) before the idle window.
  await delay(5000);
  console.log(`idle window: ${WINDOW_S} s, load average ${loadavg()[0]!.toFixed(2)}`);
  const idle = await measure(WINDOW_S);
  const browser = await launchBrowser();
  const ctx = await browser.newContext({ viewport: { width: 1800, height: 4000 } });
  const page = await ctx.newPage();
  await page.goto(`${farm.url}/app/wall`);
  await page.waitForFunction((n) => document.querySelectorAll('.wall-tile[data-frames]').length === n, NODES, { timeout: 120_000 });
  const framesBefore = await page.$$eval('.wall-tile', (els) => els.reduce((a, el) => a + Number(el.getAttribute('data-frames') ?? 0), 0));
  console.log(`wall window: ${WINDOW_S} s, every tile showing a picture, load average ${loadavg()[0]!.toFixed(2)}`);
  const open = await measure(WINDOW_S);
  const framesAfter = await page.$$eval('.wall-tile', (els) => els.reduce((a, el) => a + Number(el.getAttribute('data-frames') ?? 0), 0));
  await browser.close();
  const extra = open.nodes.map((c, i) => c - idle.nodes[i]!);
  console.log('');
  console.log(`nodes (cores, each node's process tree), ${NODES} nodes:`);
  console.log(`  idle:            ${stats(idle.nodes)}`);
  console.log(`  wall open:       ${stats(open.nodes)}`);
  console.log(`  wall minus idle: ${stats(extra)}   target <= ${NODE_TARGET} each: ${Math.max(...extra) <= NODE_TARGET ? 'met' : 'NOT met'}`);
  console.log('portal (cores, its process):');
  console.log(`  idle: ${f3(idle.portal)}, wall open: ${f3(open.portal)}, wall minus idle: ${f3(open.portal - idle.portal)}   target <= ${PORTAL_TARGET}: ${open.portal - idle.portal <= PORTAL_TARGET ? 'met' : 'NOT met'}`);
  console.log(`pictures received by the wall in the window: ${framesAfter - framesBefore} (${((framesAfter - framesBefore) / WINDOW_S / NODES).toFixed(2)} a second per tile; a still screen sends none)`);
} finally {
  for (const { d } of daemons) await d.stop().catch(() => undefined);
  await farm.stop();
  await pack.cleanup();
  rmSync(work, { recursive: true, force: true });
}
