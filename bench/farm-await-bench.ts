/**
 * `await_completion` through the portal (issue 10): 1,000 HTTP clients
 * across 10 nodes, every waiter answered within 200 ms of its job's end.
 *
 * A real farm in this process (test/helpers/farm.ts): a throwaway PostgreSQL,
 * the real portal (startFarmPortal) and 10 real nodes (the `farmhand serve`
 * daemon, startTestDaemon, capture `none:`) joined to it over the real node
 * connection, uploading their results. Each node runs one job (one test that
 * sleeps --sleep seconds, then passes); 100 clients per job hold
 * `GET /api/v2/jobs/<uid>/await_completion` on the portal, each on its own
 * connection with a real v2 token. The jobs end by themselves.
 *
 * For each waiter: its answer's arrival minus its job's `end_time` (the
 * node's clock: the same machine). The portal holds an exited Job until its
 * results are in the index (docs/farm.md, "Read your writes"), so the bench
 * also watches the index and prints, per job, when its results arrived, and
 * for each waiter the time from max(job end, results in the index) to its
 * answer: the portal's own delay with the upload taken out. The node sends a
 * result's record ahead of its files; the bench prints when the files were
 * done too (the uploader's onDelivered), which the waiters do not wait for.
 *
 *   node --import tsx bench/farm-await-bench.ts [--nodes 10] [--waiters 1000] [--sleep 15]
 * Exit status: 0 target met, 1 missed, 2 the benchmark failed.
 */
import http from 'node:http';
import { startTestFarm, type TestFarm } from '../test/helpers/farm.js';
import { makeTestPack, type TestPackRepo } from '../test/fixtures/testPack.js';
import { percentile, Targets } from './lib/stats.js';

const argv = process.argv;
const arg = (name: string, dflt: number): number => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : dflt);
const opts = { nodes: arg('--nodes', 10), waiters: arg('--waiters', 1000), sleep: arg('--sleep', 15) };
const targets = new Targets();

interface Answer {
  status: number;
  body: string;
  /** Epoch ms when the request was written, and when the whole answer had arrived. */
  sentAt: number;
  at: number;
}

function request(url: string, token: string, method = 'GET', json?: unknown): Promise<Answer> {
  const payload = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
  return new Promise((resolve, reject) => {
    let sentAt = 0;
    const req = http.request(
      url,
      {
        method,
        agent: false,
        headers: { Authorization: `token ${token}`, ...(payload && { 'Content-Type': 'application/json', 'Content-Length': payload.length }) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), sentAt, at: Date.now() }));
        res.on('error', reject);
      },
    );
    req.on('finish', () => (sentAt = Date.now()));
    req.setTimeout(180_000, () => req.destroy(new Error(`${method} ${url}: no answer in 180 s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

const stats = (xs: number[]): string =>
  `median ${percentile(xs, 50).toFixed(0)} ms, p95 ${percentile(xs, 95).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms`;

async function main(): Promise<number> {
  let farm: TestFarm | undefined;
  let pack: TestPackRepo | undefined;
  try {
    farm = await startTestFarm({ portal: { log_level: 'warn', heartbeat_secs: 5 } });
    pack = await makeTestPack({
      'tests/wait.py': `import time\n\ndef test_wait():\n    time.sleep(${opts.sleep})\n`,
      'config/stbt.conf': '[test_pack]\ndefault_remote_control = none\n',
      'config/remote-control/none.lircd.conf': 'begin remote\n  name none\nend remote\n',
    });
    const ids = Array.from({ length: opts.nodes }, (_, i) => `farmhand-await${String(i).padStart(2, '0')}`);
    for (const id of ids) await farm.addNode(id, { pack, config: { capture: { uri: 'none:' }, log_level: 'warn' } });
    const token = await farm.tokenFor('bench');
    console.log(`farm: portal ${farm.url}, ${opts.nodes} nodes (farmhand serve daemons, in this process), ${opts.waiters} waiters`);

    // One job per node, through the portal.
    const jobs: string[] = [];
    for (const id of ids) {
      const r = await request(`${farm.url}/api/v2/run_tests`, token, 'POST', { node_id: id, test_pack_revision: pack.sha, test_cases: ['tests/wait.py::test_wait'] });
      if (r.status !== 200) throw new Error(`run_tests on ${id}: ${r.status} ${r.body}`);
      jobs.push((JSON.parse(r.body) as { job_uid: string }).job_uid);
    }
    const startedAt = Date.now();
    // When each job's result was wholly uploaded (its files too: the record goes ahead of them).
    const filesIn = new Map<string, number>();
    for (const id of ids) farm.nodes.get(id)!.daemon.uploader?.onDelivered((rid) => filesIn.set(rid.split('/').slice(0, 4).join('/'), Date.now()));

    // Watch the index: when each job's result arrives.
    const inIndex = new Map<string, number>();
    let watching = true;
    const watcher = (async () => {
      while (inIndex.size < jobs.length) {
        const last = !watching; // one look after the waiters are answered: a result can land between two polls
        const { rows } = await farm.db.query<{ job_uid: string }>('SELECT DISTINCT job_uid FROM results WHERE job_uid = ANY($1)', [jobs]);
        const now = Date.now();
        for (const r of rows) if (!inIndex.has(r.job_uid)) inIndex.set(r.job_uid, now);
        if (last) break;
        await new Promise((r) => setTimeout(r, 10));
      }
    })().catch((e: unknown) => console.error(`watching the index failed: ${(e as Error).message}`));

    const perJob = Math.ceil(opts.waiters / jobs.length);
    let answered = 0;
    const progress = setInterval(() => console.log(`  ${((Date.now() - startedAt) / 1000).toFixed(0)} s: ${answered} answered, results of ${inIndex.size} jobs in the index`), 10_000);
    const waiters = Array.from({ length: opts.waiters }, (_, i) => {
      const uid = jobs[Math.floor(i / perJob)]!;
      // As a client does: the node answers a job still running after its long poll (55 s); ask again.
      const wait = async (): Promise<{ uid: string; a: Answer }> => {
        for (;;) {
          const a = await request(`${farm!.url}/api/v2/jobs${uid}/await_completion`, token);
          if (a.status !== 200 || (JSON.parse(a.body) as { status?: string }).status === 'exited') return { uid, a };
        }
      };
      return wait().then((x) => (answered++, x));
    });
    const settled = await Promise.allSettled(waiters).finally(() => {
      watching = false;
      clearInterval(progress);
    });
    const failed = settled.filter((s) => s.status === 'rejected');
    const okPerJob = jobs.map((u) => settled.filter((s) => s.status === 'fulfilled' && s.value.uid === u).length);
    if (failed.length) console.log(`answered per job: ${okPerJob.join(', ')}`);
    if (failed.length) throw new Error(`${failed.length} waiters failed, the first: ${String(failed[0]!.reason)}`);
    const answers = settled.map((s) => (s as PromiseFulfilledResult<{ uid: string; a: Answer }>).value);
    await watcher;
    console.log(`all ${answers.length} answered ${((Date.now() - startedAt) / 1000).toFixed(1)} s after the jobs started`);

    const sinceEnd: number[] = [];
    const sinceSettled: number[] = [];
    let late = 0;
    const ends = new Map<string, number>();
    for (const { uid, a } of answers) {
      if (a.status !== 200) throw new Error(`await_completion ${uid}: ${a.status} ${a.body.slice(0, 300)}`);
      const job = JSON.parse(a.body) as { status: string; end_time: string | null };
      if (job.status !== 'exited' || !job.end_time) throw new Error(`await_completion ${uid} answered a job that has not ended: ${a.body.slice(0, 300)}`);
      const end = Date.parse(job.end_time);
      ends.set(uid, end);
      if (a.sentAt > end) late++;
      sinceEnd.push(a.at - end);
      sinceSettled.push(a.at - Math.max(end, inIndex.get(uid) ?? end));
    }
    if (late) console.log(`NOTE: ${late} waiters were sent after their job had ended (raise --sleep)`);
    const upload = jobs.map((u) => (inIndex.get(u) ?? NaN) - ends.get(u)!);
    console.log(`each job's result in the portal's index after the job's end: ${upload.map((x) => x.toFixed(0)).join(', ')} ms`);
    const drained = Date.now() + 120_000;
    while (ids.some((id) => (farm!.nodes.get(id)!.daemon.uploader?.pending.length ?? 0) > 0) && Date.now() < drained) await new Promise((r) => setTimeout(r, 10));
    const files = jobs.map((u) => (filesIn.get(u) ?? NaN) - ends.get(u)!);
    console.log(`each job's files uploaded (the node's uploader done) after the job's end: ${files.map((x) => x.toFixed(0)).join(', ')} ms`);
    console.log(`\nwaiter answered after its job's end (what a client sees):            ${stats(sinceEnd)}; ${sinceEnd.filter((x) => x <= 200).length} of ${sinceEnd.length} within 200 ms`);
    console.log(`waiter answered after max(job end, results in the index) (portal):   ${stats(sinceSettled)}; ${sinceSettled.filter((x) => x <= 200).length} of ${sinceSettled.length} within 200 ms\n`);
    targets.check(`every waiter within 200 ms of its job's end (max)`, Math.max(...sinceEnd), '<=', 200, 'ms', stats(sinceEnd));
    targets.check(`every waiter within 200 ms of its results in the index (max)`, Math.max(...sinceSettled), '<=', 200, 'ms', stats(sinceSettled));
    targets.printSummary();
    return targets.missed.length ? 1 : 0;
  } finally {
    await farm?.stop().catch(() => undefined);
    await pack?.cleanup().catch(() => undefined);
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(2);
  },
);
