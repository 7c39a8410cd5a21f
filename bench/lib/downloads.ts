/**
 * Comparing how fast servers send one large file: downloads alternate
 * between the servers (one warm-up each first), so drift on a shared machine
 * hits all of them alike, and each server's CPU time (its whole process
 * group) is counted per download, which shows whether it copies the bytes
 * itself or lets the kernel do it.
 */
import { readFileSync } from 'node:fs';
import { pickDownloader, type Download } from './http.js';
import { groupCpuSecs } from './processes.js';
import { formatSummary, summarize, type Summary } from './stats.js';

/** A server to download from. */
export interface DownloadTarget {
  server: string;
  url: string;
  /** Its process group, for the CPU time. */
  pgid: number;
}

/** What the downloads of one server measured. */
export interface DownloadResult extends DownloadTarget {
  mibps: number[];
  summary: Summary;
  cpu: { user: number; system: number; seconds: number };
}

/** Download from `t` once; throws unless every byte arrived with a 200. */
async function once(t: DownloadResult, download: (url: string) => Promise<Download>, bytes: number, counted: boolean, log?: (l: string) => void): Promise<void> {
  const before = groupCpuSecs(t.pgid);
  const r = await download(t.url);
  const after = groupCpuSecs(t.pgid);
  if (r.status !== 200 || r.bytes !== bytes) throw new Error(`${t.server}: status ${r.status}, ${r.bytes} of ${bytes} bytes`);
  if (!counted) return;
  const user = after.user - before.user;
  const system = after.system - before.system;
  t.mibps.push(r.bytes / 2 ** 20 / r.seconds);
  t.cpu.user += user;
  t.cpu.system += system;
  t.cpu.seconds += r.seconds;
  log?.(`      ${t.server.padEnd(8)} ${(r.bytes / 2 ** 20 / r.seconds).toFixed(0).padStart(5)} MiB/s, ${((user + system) / r.seconds).toFixed(2)} cores`);
}

/**
 * `rounds` counted downloads of a `bytes`-long file from each target, in
 * turn, after one warm-up each. Prints the load average, one summary line per
 * server (and each download when `verbose`); returns the results in the
 * order given and the name of the client used.
 */
export async function compareDownloads(
  targets: DownloadTarget[],
  opts: { bytes: number; rounds: number; verbose: boolean; log: (line: string) => void },
): Promise<{ results: DownloadResult[]; client: string }> {
  const { name, download } = await pickDownloader();
  const results: DownloadResult[] = targets.map((t) => ({ ...t, mibps: [], summary: undefined!, cpu: { user: 0, system: 0, seconds: 0 } }));
  opts.log(`load average before the downloads: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  for (let i = -1; i < opts.rounds; i++) {
    for (const t of results) await once(t, download, opts.bytes, i >= 0, opts.verbose ? opts.log : undefined);
  }
  const gib = (opts.rounds * opts.bytes) / 2 ** 30;
  for (const t of results) {
    t.summary = summarize(t.mibps);
    const c = t.cpu;
    opts.log(
      `${t.server.padEnd(8)} ${formatSummary(t.summary, 'MiB/s', 0)}; CPU per GiB: user ${(c.user / gib).toFixed(2)} s, ` +
        `system ${(c.system / gib).toFixed(2)} s (${((c.user + c.system) / c.seconds).toFixed(2)} cores while sending)`,
    );
  }
  return { results, client: name };
}
