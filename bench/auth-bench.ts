/**
 * What the role check costs a request (issue 21: "the authorisation check adds <= 0.2 ms median per request,
 * same-run ratio with it off"): `node --import tsx bench/auth-bench.ts [--rounds 40] [--per-round 250]`.
 *
 * Two copies of the node's Koa app (src/http/app.ts) in this process, on loopback, one with the checks from the
 * table of endpoints and one built with `authorize: false`, both over the same real tokens file (50 tokens, every
 * user with a role, so the check runs and passes). A cheap authenticated GET (`GET /api/v2/user` with a token)
 * is sent sequentially over one keep-alive connection per app; the rounds alternate between the two apps so
 * that the machine's load falls on both alike. Prints the median per request of each, the ratio and the
 * difference, and the check alone called in a loop (no HTTP). Exit 0 when the difference of the medians is
 * <= 0.2 ms, 1 otherwise.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Koa from 'koa';
import { ROLES } from '../src/core/roles.js';
import { createApp } from '../src/http/app.js';
import type { Services } from '../src/http/context.js';
import { FileTokenVerifier, TokenStore, tokensFile } from '../src/storage/tokens.js';
import { formatSummary, summarize } from './lib/stats.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROUNDS = arg('--rounds', 40);
const PER_ROUND = arg('--per-round', 250);
const TARGET_MS = 0.2;

const silent = { child: () => silent, info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as unknown as Services['logger'];

/**
 * What the routers need to be built: `GET /api/v2/user` reads nothing but the caller. The other routes are
 * mounted (and given their checks) but never called here.
 */
const services = { logger: silent, nodeId: 'bench', version: 'bench', frames: {}, publicUrl: undefined } as unknown as Services;

async function listen(app: Koa): Promise<{ server: Server; port: number }> {
  const server = createServer(app.callback());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

function get(agent: Agent, port: number, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = request({ host: '127.0.0.1', port, path: '/api/v2/user', agent, headers: { Authorization: `token ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET /api/v2/user answered ${res.statusCode}`));
        else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'farmhand-auth-bench-'));
  try {
    const store = new TokenStore(tokensFile(dir));
    let token = '';
    for (let i = 0; i < 50; i++) token = (await store.create(`user${i}`, { role: ROLES[i % ROLES.length]! })).token;
    // The last token's user has the role ROLES[49 % 4] = manual: /api/v2/user needs read, so the check runs and passes.
    const make = (authorize: boolean) =>
      createApp(services, {
        tokens: new FileTokenVerifier(tokensFile(dir), silent),
        rateLimit: { requests_per_second: 1e9, burst: 1e9, artifact_burst: 1e9 },
        authorize,
      });
    const on = await listen(make(true));
    const off = await listen(make(false));
    const agentOn = new Agent({ keepAlive: true, maxSockets: 1 });
    const agentOff = new Agent({ keepAlive: true, maxSockets: 1 });
    const times = { on: [] as number[], off: [] as number[] };
    // Warm up both (JIT, connections).
    for (let i = 0; i < 500; i++) {
      await get(agentOn, on.port, token);
      await get(agentOff, off.port, token);
    }
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
      for (const which of order) {
        const [agent, port] = which === 'on' ? [agentOn, on.port] : [agentOff, off.port];
        for (let i = 0; i < PER_ROUND; i++) times[which].push(await get(agent, port, token));
      }
    }
    agentOn.destroy();
    agentOff.destroy();
    on.server.close();
    off.server.close();

    // The check alone: what authorizeRoutes put in front of GET /api/v2/user, called directly.
    const app = make(true);
    const layer = (app.middleware as unknown as { router?: { stack: { path: string; methods: string[]; stack: Koa.Middleware[] }[] } }[])
      .flatMap((m) => m.router?.stack ?? [])
      .find((l) => l.path === '/api/v2/user' && l.methods.includes('GET'))!;
    const check = layer.stack[0]!;
    const ctx = { state: { user: { login: 'user49', tokenId: 'x', role: 'manual' } } } as unknown as Koa.Context;
    const next = () => Promise.resolve();
    const N = 1_000_000;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) void check(ctx, next);
    const perCallUs = Number(process.hrtime.bigint() - t0) / 1e3 / N;

    const sOn = summarize(times.on);
    const sOff = summarize(times.off);
    const diff = sOn.median - sOff.median;
    console.log(`GET /api/v2/user with a token, sequential, keep-alive, ${ROUNDS} alternating rounds of ${PER_ROUND}:`);
    console.log(`  checks on:  ${formatSummary(sOn, 'ms', 3)}`);
    console.log(`  checks off: ${formatSummary(sOff, 'ms', 3)}`);
    console.log(`  ratio of medians (on/off): ${(sOn.median / sOff.median).toFixed(3)}; difference: ${diff.toFixed(3)} ms`);
    console.log(`  the check alone, called directly: ${perCallUs.toFixed(3)} µs per call (${N} calls)`);
    const ok = diff <= TARGET_MS;
    console.log(`${ok ? 'PASS' : 'MISS'}  the check adds <= ${TARGET_MS} ms median per request (added ${diff.toFixed(3)} ms)`);
    return ok ? 0 : 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(2);
  },
);
