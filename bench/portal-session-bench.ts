/**
 * What a web session in PostgreSQL costs a request on the portal (docs/auth.md, "Sessions on the portal"):
 * the same small authenticated read (GET /api/v2/user) with a token header (checked from memory) and with a
 * session cookie (one read of web_sessions by its primary key), one request at a time, on a real portal and a
 * throwaway PostgreSQL. Prints the median and p95 of each and the difference of the medians.
 *
 *   node --import tsx bench/portal-session-bench.ts [--requests 2000]
 */
import { startTestFarm } from '../test/helpers/farm.js';
import { percentile } from './lib/stats.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const N = arg('requests', 2000);

const farm = await startTestFarm({ portal: { log_level: 'warn' } });
try {
  const token = await farm.tokenFor('bench');
  const signIn = await fetch(`${farm.url}/app/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, next: '/' }).toString(),
  });
  const cookie = /farmhand_session=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')![1]!;
  const time = async (headers: Record<string, string>): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = process.hrtime.bigint();
      const res = await fetch(`${farm.url}/api/v2/user`, { headers });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      out.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    return out;
  };
  // Warm both paths, then measure them interleaved in halves (a loaded machine drifts).
  await time({ Authorization: `token ${token}` });
  const tok: number[] = [];
  const ses: number[] = [];
  for (let round = 0; round < 2; round++) {
    tok.push(...(await time({ Authorization: `token ${token}` })));
    ses.push(...(await time({ Cookie: `farmhand_session=${cookie}` })));
  }
  const show = (name: string, xs: number[]) => `${name}: median ${percentile(xs, 50).toFixed(3)} ms, p95 ${percentile(xs, 95).toFixed(3)} ms (${xs.length} requests)`;
  console.log(show('token header  ', tok));
  console.log(show('session cookie', ses));
  console.log(`the session's read adds ${(percentile(ses, 50) - percentile(tok, 50)).toFixed(3)} ms at the median`);
} finally {
  await farm.stop();
}
