/**
 * The crash cycle shared by `crash-kill.test.ts` (a few kills) and
 * `bench/soak/crash.ts` (50): the real CLI daemon runs a soak job of short
 * pass/fail/error tests, is SIGKILLed at a random moment, restarted on the
 * same data directory and checked - state.json parses, every job is exited,
 * every completed run is listed with all its files, the in-flight run is an
 * error saying the daemon restarted, the token and reservation survive, and
 * no result seen before is lost.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { DAEMON_RESTARTED } from '../../src/core/jobs.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { waitFor } from '../helpers/wait.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const NODE_ID = 'crash-node';

/** Files every completed run has, whatever its outcome (the tool's metadata and logs). */
export const RUN_FILES = ['result.json', 'test-name', 'test-args', 'git-commit', 'duration', 'exit-status', 'failure-reason', 'stdout.log', 'stderr.log', 'combined.log', 'farmhand.log'];

export const CRASH_PACK = {
  'tests/short.py': [
    'import random, time',
    '',
    'def test_pass():',
    '    time.sleep(random.uniform(0.05, 0.5))',
    '    print("passing", flush=True)',
    '',
    'def test_fail():',
    '    time.sleep(random.uniform(0.05, 0.5))',
    '    assert False, "meant to fail"',
    '',
    'def test_error():',
    '    time.sleep(random.uniform(0.05, 0.5))',
    '    raise RuntimeError("meant to error")',
    '',
    'def test_many_files():',
    '    # Many small artifacts: retention takes long enough to delete them that kills land in it.',
    '    import os',
    '    os.makedirs("many", exist_ok=True)',
    '    for i in range(400):',
    '        open("many/%d.txt" % i, "w").write("x" * 2048)',
    '',
  ].join('\n'),
  'config/stbt.conf': '[test_pack]\ndefault_remote_control = vstb\n',
  'config/remote-control/vstb.lircd.conf': 'begin remote\n  name vstb\nend remote\n',
};
const CASES = ['tests/short.py::test_pass', 'tests/short.py::test_fail', 'tests/short.py::test_error', 'tests/short.py::test_many_files'];
/** Few results kept, so retention deletes after almost every run and kills land in it. */
const MAX_RESULTS = 6;

export interface CrashReport {
  kills: number;
  /** Kills that hit a run in flight (its result became a DaemonRestarted error). */
  inFlightKills: number;
  /** Kills that left deleted or unrecorded folders (or the trash) on disk for the restart to reclaim. */
  reclaimKills: number;
  completedRuns: number;
  /** Listed results whose files were checked, summed over the restarts. */
  resultsChecked: number;
  /** Run folders on disk that are not listed results, after the restarts (must be 0). */
  orphans: number;
  /** Files missing from listed results, plus temporary files listed as artifacts (must be 0). */
  missingFiles: number;
  /** Bytes of folders the kills left behind that the restarts deleted. */
  bytesReclaimed: number;
  problems: string[];
}

export interface Cli {
  child: ChildProcess;
  url: string;
  /**
   * Resolves once the daemon logs `start-up sweep done` (the background look at every result folder
   * and at the temporaries a crash left); only with `log_level` info or lower. Never rejects.
   */
  swept: Promise<void>;
}

/** Start `farmhand serve --config <file>` as a child (`env`: its environment); resolves once it listens. */
export function startCli(configFile: string, env: NodeJS.ProcessEnv = process.env): Promise<Cli> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let sweptNow: () => void;
  const swept = new Promise<void>((r) => (sweptNow = r));
  return new Promise((resolve, reject) => {
    let out = '';
    let listening = false;
    const timer = setTimeout(() => reject(new Error(`daemon did not start: ${out}`)), 30_000);
    child.stdout.on('data', (b: Buffer) => {
      // Only the part not yet seen and the line it may end, so a chatty daemon costs no quadratic search.
      const from = Math.max(0, out.lastIndexOf('\n') + 1);
      out += b.toString();
      const fresh = out.slice(from);
      if (fresh.includes('"msg":"start-up sweep done"')) sweptNow();
      const m = /listening on (http:\/\/\S+)/.exec(fresh);
      if (m && !listening) {
        listening = true;
        clearTimeout(timer);
        resolve({ child, url: m[1]!, swept });
      }
      if (listening) out = out.slice(out.lastIndexOf('\n') + 1);
    });
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.once('exit', (code) => reject(new Error(`daemon exited (${code}): ${out}`)));
  });
}

/** SIGKILL the daemon and wait for it to be gone. */
export async function kill(c: Cli): Promise<void> {
  if (c.child.exitCode !== null || c.child.signalCode !== null) return;
  const gone = new Promise((r) => c.child.once('exit', r));
  c.child.kill('SIGKILL');
  await gone;
}

async function api(url: string, token: string, method: string, p: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url + p, {
    method,
    headers: { Authorization: `token ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed };
}

/**
 * When a kill lands: `random` a random moment (300 ms to 2.8 s into the cycle), `mid-run` once a test process
 * runs, `retention` the moment retention is seen deleting, `folder` the moment a new run folder appears.
 */
export type KillAim = 'random' | 'mid-run' | 'retention' | 'folder';

/** The soak's mix: every third kill aims at retention, the others land at random. */
const SOAK_AIMS: KillAim[] = ['random', 'random', 'retention'];

/**
 * Run `kills` crash cycles, kill `i` aimed at `aims[i % aims.length]`; `log` gets a line per cycle.
 * Never throws for a failed check: it is listed in problems.
 */
export async function runCrashCycles(kills: number, log: (line: string) => void = () => {}, aims: KillAim[] = SOAK_AIMS): Promise<CrashReport> {
  const pack: TestPackRepo = await makeTestPack(CRASH_PACK);
  const root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-crash-'));
  const dataDir = path.join(root, 'data');
  const configFile = path.join(root, 'farmhand.json');
  const cfg = { node_id: NODE_ID, listen: '127.0.0.1:0', data_dir: dataDir, test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'info', runner: { kill_grace_secs: 1, run_tests_as: false }, retention: { min_free_mb: 0, max_results: MAX_RESULTS } };
  await writeFile(configFile, JSON.stringify(cfg));
  const report: CrashReport = { kills: 0, inFlightKills: 0, reclaimKills: 0, completedRuns: 0, resultsChecked: 0, orphans: 0, missingFiles: 0, bytesReclaimed: 0, problems: [] };
  const seen = new Map<string, string>(); // result_id -> outcome, of every completed run so far
  let cli: Cli | undefined;
  try {
    const { token } = await new TokenStore(tokensFile(dataDir)).create('crash-user');
    cli = await startCli(configFile);
    const resv = await api(cli.url, token, 'POST', '/api/v2/reservations', { node_ids: [NODE_ID], message: 'crash soak' });
    if (resv.status !== 200) throw new Error(`reserve answered ${resv.status}: ${JSON.stringify(resv.body)}`);
    const reservationId = resv.body.reservations[0].reservation_id as number;
    for (let i = 0; i < kills; i++) {
      const run = await api(cli.url, token, 'POST', '/api/v2/run_tests', { node_id: NODE_ID, test_pack_revision: 'main', test_cases: CASES, soak: 'run forever', shuffle: true, tags: {} });
      if (run.status !== 200) throw new Error(`run_tests answered ${run.status}: ${JSON.stringify(run.body)}`);
      const uid = run.body.job_uid as string;
      const aim = aims[i % aims.length]!;
      const jobFile = path.join(dataDir, 'jobs', `${uid.split('/').pop()}.json`);
      if (aim === 'retention') await untilRetentionDeletes(dataDir);
      else if (aim === 'mid-run') await waitFor(() => currentRun(jobFile)?.pid, { what: 'a test process to run', timeoutMs: 30_000 });
      else if (aim === 'folder') await untilNewRunFolder(dataDir);
      else await sleep(300 + Math.random() * 2500); // a random moment is the point here, not a wait for one
      await kill(cli);
      report.kills++;
      // What the dead daemon was doing: its job file names the run in flight, if any.
      const inFlight = currentRun(jobFile)?.result_id;
      const before = folderSizes(dataDir);
      cli = await startCli(configFile);
      // At once, while the background sweep may still run: nothing listed is lost or lacks a file.
      const problems = await checkAfterRestart(cli.url, token, dataDir, reservationId, inFlight, seen, report);
      // Once the sweep is done: still nothing lost, and no folder on disk that is not a listed result.
      await cli.swept;
      problems.push(...(await checkAfterSweep(cli.url, token, dataDir, seen, report)));
      // The trash is emptied in the background after start: wait for it, then count what the restart reclaimed.
      await waitFor(() => !existsSync(path.join(dataDir, 'results', '.trash')) || readdirSync(path.join(dataDir, 'results', '.trash')).length === 0, {
        what: 'the trash to be emptied',
        timeoutMs: 60_000,
      });
      const after = folderSizes(dataDir);
      let reclaimed = 0;
      for (const [dir, bytes] of before) if (!after.has(dir)) reclaimed += bytes;
      if (reclaimed > 0) report.reclaimKills++;
      report.bytesReclaimed += reclaimed;
      if (inFlight) report.inFlightKills++;
      report.problems.push(...problems.map((p) => `kill ${i + 1}: ${p}`));
      log(`kill ${i + 1}/${kills} (${aim}): job ${uid}, in flight ${inFlight ?? 'none'}, runs so far ${report.completedRuns}, reclaimed ${reclaimed} bytes, problems ${problems.length}`);
    }
  } finally {
    if (cli) await kill(cli);
    await rm(root, { recursive: true, force: true });
    await pack.cleanup();
  }
  return report;
}

/** Resolves as soon as retention is seen deleting (polled on every turn of the event loop), or after 20 s. */
async function untilRetentionDeletes(dataDir: string): Promise<void> {
  const trash = path.join(dataDir, 'results', '.trash');
  const index = path.join(dataDir, 'results', 'index.jsonl');
  const tombs = () => {
    try {
      return readFileSync(index, 'utf8').split('{"deleted":').length;
    } catch {
      return 0;
    }
  };
  const before = tombs();
  // An aim, not an assertion: when retention never starts deleting, the kill lands anyway.
  await waitFor(() => (existsSync(trash) && readdirSync(trash).length > 0) || tombs() > before, {
    what: 'retention to start deleting',
    timeoutMs: 20_000,
    intervalMs: 0,
  }).catch(() => undefined);
}

/** Ids retention deleted: the tombstone lines of the results index (the soak never reaches a compaction). */
function tombstones(dataDir: string): Set<string> {
  const out = new Set<string>();
  let text = '';
  try {
    text = readFileSync(path.join(dataDir, 'results', 'index.jsonl'), 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('{"deleted":')) continue;
    try {
      out.add((JSON.parse(line) as { deleted: string }).deleted);
    } catch {
      // a torn last line
    }
  }
  return out;
}

/** The job file's run in flight (null between runs); undefined while the file is not there. */
function currentRun(jobFile: string): { result_id: string; pid: number | null } | null | undefined {
  try {
    return (JSON.parse(readFileSync(jobFile, 'utf8')) as { current_run: { result_id: string; pid: number | null } | null }).current_run;
  } catch {
    return undefined; // not written yet, or replaced under us: look again
  }
}

/** Resolves the moment a run folder appears that was not on disk when called (polled on every turn of the event loop). */
async function untilNewRunFolder(dataDir: string): Promise<void> {
  const known = new Set(folderSizes(dataDir).keys());
  await waitFor(
    async () => {
      await new Promise((r) => setImmediate(r));
      return [...folderSizes(dataDir).keys()].some((dir) => !dir.startsWith('.trash/') && !known.has(dir));
    },
    { what: 'a new run folder', timeoutMs: 30_000, intervalMs: 0 },
  );
}

/** Bytes of every run folder on disk (`<hex>/<n>/<stamp>`) and of each folder in the trash, by path. */
function folderSizes(dataDir: string): Map<string, number> {
  const out = new Map<string, number>();
  const results = path.join(dataDir, 'results');
  for (const hex of dirs(results)) {
    if (hex === '.trash') {
      for (const t of dirs(path.join(results, hex))) out.set(`.trash/${t}`, bytesUnder(path.join(results, hex, t)));
      continue;
    }
    for (const num of dirs(path.join(results, hex))) {
      for (const stamp of dirs(path.join(results, hex, num))) out.set(`${hex}/${num}/${stamp}`, bytesUnder(path.join(results, hex, num, stamp)));
    }
  }
  return out;
}

function dirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return [];
  }
}

function bytesUnder(dir: string): number {
  let total = 0;
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      total += e.isDirectory() ? bytesUnder(full) : e.isFile() ? statSync(full).size : 0;
    }
  } catch {
    // removed while measuring
  }
  return total;
}

async function checkAfterRestart(
  url: string,
  token: string,
  dataDir: string,
  reservationId: number,
  inFlight: string | undefined,
  seen: Map<string, string>,
  report: CrashReport,
): Promise<string[]> {
  const problems: string[] = [];
  try {
    JSON.parse(readFileSync(path.join(dataDir, 'state.json'), 'utf8'));
  } catch (e) {
    problems.push(`state.json does not parse: ${String(e)}`);
  }
  const user = await api(url, token, 'GET', '/api/v2/user');
  if (user.status !== 200 || user.body.login !== 'crash-user') problems.push(`token no longer works: ${user.status}`);
  const node = await api(url, token, 'GET', `/api/v2/nodes/${NODE_ID}`);
  if (node.body?.reservation?.reservation_id !== reservationId) problems.push(`reservation ${reservationId} lost: ${JSON.stringify(node.body?.reservation)}`);
  for (const f of readdirSync(path.join(dataDir, 'jobs')).filter((n) => /^\d+\.json$/.test(n))) {
    const j = JSON.parse(readFileSync(path.join(dataDir, 'jobs', f), 'utf8')) as { job_uid: string };
    const res = await api(url, token, 'GET', `/api/v2/jobs${j.job_uid}`);
    if (res.body?.status !== 'exited') problems.push(`job ${j.job_uid} is ${res.status} ${res.body?.status}`);
  }
  const list = await api(url, token, 'GET', '/api/v2/results');
  const listed = new Map<string, { result: string; failure_reason: string | null }>((list.body as Array<{ result_id: string; result: string; failure_reason: string | null }>).map((r) => [r.result_id, r]));
  // Retention deletes the oldest results: those are tombstoned in the index, never silently gone.
  const deleted = tombstones(dataDir);
  for (const [id, outcome] of seen) {
    if (deleted.has(id)) seen.delete(id);
    else if (listed.get(id)?.result !== outcome) problems.push(`result ${id} (${outcome}) lost or changed`);
  }
  // Each job's counts agree with its listed (and deleted) results, however the crash fell between recording a run and saving the job.
  for (const f of readdirSync(path.join(dataDir, 'jobs')).filter((n) => /^\d+\.json$/.test(n))) {
    const j = JSON.parse(readFileSync(path.join(dataDir, 'jobs', f), 'utf8')) as { job_uid: string; result_counts: Record<string, number> };
    const mine = [...listed.keys(), ...deleted].filter((id) => id.startsWith(`${j.job_uid}/`)).length;
    const counted = j.result_counts.pass! + j.result_counts.fail! + j.result_counts.error!;
    if (counted !== mine) problems.push(`job ${j.job_uid} counts ${counted} results but lists or deleted ${mine}`);
  }
  if (inFlight) {
    // An error saying the daemon restarted - unless the kill fell after the run was recorded, before the job file said so.
    const r = listed.get(inFlight);
    const [, , hex, num, stamp] = inFlight.split('/');
    let log = '';
    try {
      log = readFileSync(path.join(dataDir, 'results', hex!, num!, stamp!, 'farmhand.log'), 'utf8');
    } catch {
      // missing: reported with the other files below
    }
    const finished = log.includes('Finished tests/');
    if (!r || (!finished && (r.result !== 'error' || r.failure_reason !== DAEMON_RESTARTED))) problems.push(`in-flight run ${inFlight} is ${JSON.stringify(r)}`);
  }
  // Every listed result has every file of a run, the in-flight one too (recovery wrote what it lacked); no temporary file is listed.
  for (const [id, r] of listed) {
    const [, , hex, num, stamp] = id.split('/');
    const dir = path.join(dataDir, 'results', hex!, num!, stamp!);
    const missing = RUN_FILES.filter((f) => !existsSync(path.join(dir, f)));
    report.resultsChecked++;
    report.missingFiles += missing.length;
    if (missing.length) problems.push(`result ${id} lacks ${missing.join(', ')}`);
    if (!seen.has(id)) {
      const arts = await api(url, token, 'GET', `/api/v2/results${id}/artifacts/`);
      if (arts.status !== 200) problems.push(`artifacts of ${id} answered ${arts.status}`);
      const temps = Object.keys((arts.body as Record<string, unknown>) ?? {}).filter((f) => f.split('/').pop()!.endsWith('.tmp'));
      report.missingFiles += temps.length;
      if (temps.length) problems.push(`artifacts of ${id} list temporary files ${temps.join(', ')}`);
      seen.set(id, r.result);
      report.completedRuns++;
    }
  }
  return problems;
}

/**
 * After the sweep that follows a start: every result seen so far (and not deleted by retention) is
 * still listed with all its files, and every run folder on disk is a listed result (nothing
 * half-created or half-deleted stays behind).
 */
async function checkAfterSweep(url: string, token: string, dataDir: string, seen: Map<string, string>, report: CrashReport): Promise<string[]> {
  const problems: string[] = [];
  const list = await api(url, token, 'GET', '/api/v2/results');
  const listed = new Set((list.body as Array<{ result_id: string }>).map((r) => r.result_id));
  const deleted = tombstones(dataDir);
  for (const id of seen.keys()) {
    if (deleted.has(id)) continue;
    if (!listed.has(id)) problems.push(`result ${id} lost during the sweep after start`);
    const [, , hex, num, stamp] = id.split('/');
    const missing = RUN_FILES.filter((f) => !existsSync(path.join(dataDir, 'results', hex!, num!, stamp!, f)));
    report.missingFiles += missing.length;
    if (missing.length) problems.push(`after the sweep, result ${id} lacks ${missing.join(', ')}`);
  }
  const listedDirs = new Set([...listed].map((id) => id.split('/').slice(2).join('/')));
  for (const dir of folderSizes(dataDir).keys()) {
    if (dir.startsWith('.trash/') || listedDirs.has(dir)) continue;
    report.orphans++;
    problems.push(`folder results/${dir} is on disk but not a listed result`);
  }
  return problems;
}
