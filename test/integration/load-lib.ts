/**
 * The load run shared by `load-mixed.test.ts` and `bench/soak/load.ts`:
 * many clients (several tokens, plus anonymous v1 callers) send a mix of
 * results lists, screenshots, job status, artifact listings and downloads,
 * CSV and v2 calls at a daemon, many at once, while one well-behaved client
 * (its own token, one request at a time, a pause between) goes about a CI
 * job's usual polls. Counts every status and the well-behaved client's
 * latencies.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface LoadTarget {
  url: string;
  /** Tokens of the noisy clients (one client each). */
  tokens: string[];
  /** The well-behaved client's token. */
  quietToken: string;
  nodeId: string;
  jobUid: string;
  resultIds: string[];
}

export interface LoadReport {
  sent: number;
  statuses: Record<number, number>;
  /** Network errors (connection refused/reset): the daemon must never cause these. */
  networkErrors: number;
  quiet: { sent: number; statuses: Record<number, number>; latenciesMs: number[] };
}

/** The request paths of the mix; `tok` is undefined for an anonymous v1 call. */
function mix(t: LoadTarget, i: number): { path: string; tok: string | undefined } {
  const rid = t.resultIds[i % t.resultIds.length]!;
  const tok = t.tokens[i % t.tokens.length];
  const all: Array<{ path: string; tok: string | undefined }> = [
    { path: '/api/v1/results', tok: undefined },
    { path: `/api/v2/results?filter=${encodeURIComponent(`job:${t.jobUid}`)}&sort=date:desc`, tok },
    { path: `/api/v2/nodes/${t.nodeId}/screenshot.png`, tok },
    { path: '/api/v1/device/screenshot.png', tok: undefined },
    { path: `/api/v2/jobs${t.jobUid}`, tok },
    { path: `/api/v1/jobs${t.jobUid}`, tok: undefined },
    { path: `/api/v2/results${rid}/artifacts/`, tok },
    { path: `/api/v2/results${rid}/artifacts/combined.log`, tok },
    { path: `/api/v2/results${rid}`, tok },
    { path: '/api/v2/results.csv', tok },
    { path: `/api/v2/nodes/${t.nodeId}`, tok },
    { path: '/api/v2/user', tok },
  ];
  return all[i % all.length]!;
}

async function one(url: string, tok: string | undefined): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(url, { headers: tok ? { Authorization: `token ${tok}` } : {} });
  await res.arrayBuffer();
  return { status: res.status, ms: performance.now() - t0 };
}

/** The well-behaved client: one CI job's traffic, one request at a time, `pauseMs` apart. */
export async function quietClient(t: LoadTarget, count: number, pauseMs: number): Promise<LoadReport['quiet']> {
  const out: LoadReport['quiet'] = { sent: 0, statuses: {}, latenciesMs: [] };
  const rid = t.resultIds[0]!;
  const paths = [`/api/v2/jobs${t.jobUid}`, `/api/v2/results?filter=${encodeURIComponent(`job:${t.jobUid}`)}`, `/api/v2/results${rid}/artifacts/`, `/api/v2/results${rid}/artifacts/stdout.log`];
  for (let i = 0; i < count; i++) {
    const r = await one(t.url + paths[i % paths.length]!, t.quietToken);
    out.sent++;
    out.statuses[r.status] = (out.statuses[r.status] ?? 0) + 1;
    out.latenciesMs.push(r.ms);
    await sleep(pauseMs);
  }
  return out;
}

/** `total` mixed requests, `concurrency` in flight at once, alongside the quiet client. */
export async function runLoad(t: LoadTarget, total: number, concurrency: number, quiet: { count: number; pauseMs: number }): Promise<LoadReport> {
  const report: LoadReport = { sent: 0, statuses: {}, networkErrors: 0, quiet: { sent: 0, statuses: {}, latenciesMs: [] } };
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const m = mix(t, i);
      try {
        const r = await one(t.url + m.path, m.tok);
        report.statuses[r.status] = (report.statuses[r.status] ?? 0) + 1;
      } catch {
        report.networkErrors++;
      }
      report.sent++;
    }
  };
  const [q] = await Promise.all([quietClient(t, quiet.count, quiet.pauseMs), ...Array.from({ length: concurrency }, worker)]);
  report.quiet = q;
  return report;
}

/** The p-th percentile (0-100) of a list of numbers. */
export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN;
}
