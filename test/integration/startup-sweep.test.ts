/**
 * The sweep after start (issue 22, "atomic-write temporaries and 2 temp
 * folders per crash are never swept"; issue 23, work on every folder after
 * the port is ready): the real CLI daemon, started on a data directory and a
 * TMPDIR where a crash's leftovers were planted, deletes those that are not
 * in use and keeps the rest.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chown, lutimes, mkdir, mkdtemp, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runTempPrefixes, sweepTemps } from '../../src/storage/sweep.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { waitFor } from '../helpers/wait.js';
import { kill, startCli, type Cli } from './crash-lib.js';

/** A pid that was alive and is not any more (a child that exited). */
async function deadPid(): Promise<number> {
  const child = spawn('true');
  await new Promise((r) => child.once('exit', r));
  return child.pid!;
}

/** Write `file` (or make the folder `dir/`), last changed an hour ago: older than any daemon started now. */
async function plantOld(p: string, body = 'half'): Promise<void> {
  if (p.endsWith('/')) {
    await mkdir(p, { recursive: true });
    await writeFile(path.join(p, 'config.json'), '{}');
  } else {
    await writeFile(p, body);
  }
  const past = new Date(Date.now() - 3600_000);
  await utimes(p, past, past);
}

describe('the sweep after start: what a crash left outside the result folders', function () {
  this.timeout(120_000);
  let root: string;
  let pack: TestPackRepo;
  let cli: Cli | undefined;

  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-sweep-'));
    pack = await makeTestPack({ 'tests/t.py': 'import os\n\ndef test_pass():\n    assert os.path.isdir(os.path.dirname(os.environ["FARMHAND_REPORT"]))\n' });
  });
  afterEach(async () => {
    if (cli) await kill(cli);
    cli = undefined;
    await pack.cleanup();
    await rm(root, { recursive: true, force: true });
  });

  it('deletes old atomic temporaries of dead writers and the tagged per-run temp folders; keeps a live writer\'s, another data directory\'s, untagged ones; runs still get their folders', async () => {
    const dataDir = path.join(root, 'data');
    const tmp = path.join(root, 'tmp');
    await mkdir(path.join(dataDir, 'jobs'), { recursive: true });
    await mkdir(path.join(dataDir, 'results'), { recursive: true });
    await mkdir(tmp);
    const dead = await deadPid();
    const { run, control } = runTempPrefixes(dataDir);
    const other = runTempPrefixes(path.join(root, 'another-data-dir'));
    const gone = [
      path.join(dataDir, `.state.json.${dead}.0123abcd.tmp`),
      path.join(dataDir, 'jobs', `.7.json.${dead}.89abcdef.tmp`),
      path.join(dataDir, 'results', `.index.jsonl.${dead}.00ff00ff.tmp`),
      path.join(tmp, `${run}a1B2c3/`),
      path.join(tmp, `${control}d4E5f6/`),
    ];
    const kept = [
      // Being written by a live process (this one: as a `farmhand token create` would be).
      path.join(dataDir, `.tokens.json.${process.pid}.aaaabbbb.tmp`),
      // The runs of a daemon on another data directory (maybe live), and untagged folders (owner unknown).
      path.join(tmp, `${other.run}x7Y8z9/`),
      path.join(tmp, 'farmhand-run-Q1w2E3/'),
      // Not a temporary.
      path.join(dataDir, 'notes.txt'),
    ];
    for (const p of [...gone, ...kept]) await plantOld(p);

    const config = path.join(root, 'farmhand.json');
    await writeFile(config, JSON.stringify({ node_id: 'sweep-node', listen: '127.0.0.1:0', data_dir: dataDir, test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'info', runner: { run_tests_as: false } }));
    cli = await startCli(config, { ...process.env, TMPDIR: tmp });
    await cli.swept;
    for (const p of gone) expect(existsSync(p), `${p} swept`).to.equal(false);
    for (const p of kept) expect(existsSync(p), `${p} kept`).to.equal(true);

    // A run after the sweep makes its folders under the tag, and removes them at its end.
    const res = await fetch(`${cli.url}/api/v1/run_tests`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass'] }),
    });
    expect(res.status).to.equal(200);
    const { job_url } = (await res.json()) as { job_url: string };
    const job = await waitFor(
      async () => {
        const j = (await (await fetch(job_url)).json()) as { status: string; result_counts: { pass: number } };
        return j.status === 'exited' ? j : undefined;
      },
      { what: 'the job to exit', timeoutMs: 60_000 },
    );
    expect(job.result_counts.pass).to.equal(1);
    expect(readdirSync(tmp).filter((n) => n.startsWith(run) || n.startsWith(control))).to.deep.equal([]);
  });

  it('a node without capture, live view, virtual box or IR Toy never loads sharp (libvips) nor serialport\'s native binding (issue 23: memory)', async () => {
    const config = path.join(root, 'farmhand.json');
    await writeFile(config, JSON.stringify({ node_id: 'sweep-node', listen: '127.0.0.1:0', data_dir: path.join(root, 'data'), test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'info', runner: { run_tests_as: false } }));
    cli = await startCli(config);
    await cli.swept;
    expect((await fetch(`${cli.url}/api/v1/results`)).status).to.equal(200);
    const maps = readFileSync(`/proc/${cli.child.pid}/maps`, 'utf8');
    const native = [...new Set(maps.split('\n').map((l) => l.split(/\s+/)[5] ?? '').filter((f) => /sharp|libvips|serialport/.test(f)))];
    expect(native).to.deep.equal([]);
  });

  it('sweepTemps: a folder or temporary changed since the start is in use and stays; another user\'s folder and a symlink under the tag stay, and nothing is followed through the link', async () => {
    const dead = await deadPid();
    const { run } = runTempPrefixes(root);
    const before = Date.now() - 60_000;
    await plantOld(path.join(root, `.x.json.${dead}.0123abcd.tmp`));
    await plantOld(path.join(root, `${run}old123/`));
    // Made after `before`: a live run's folder and a write in progress of this daemon's.
    await mkdir(path.join(root, `${run}new456`));
    // Another user's folder under the tag (in a shared /tmp): never ours to delete. A symlink under the tag: not followed.
    await plantOld(path.join(root, `${run}other7/`));
    if (process.getuid?.() === 0) await chown(path.join(root, `${run}other7`), 65534, 65534);
    await mkdir(path.join(root, 'outside'));
    await writeFile(path.join(root, 'outside', 'precious'), 'x');
    await symlink(path.join(root, 'outside'), path.join(root, `${run}link89`));
    await lutimes(path.join(root, `${run}link89`), new Date(0), new Date(0));
    await writeFile(path.join(root, `.y.json.${dead}.0123abcd.tmp`), 'now');
    const report = await sweepTemps({ dirs: [root], tmpDir: root, prefixes: [run], before });
    expect(report).to.deep.equal({ atomicTemps: 1, tempFolders: process.getuid?.() === 0 ? 1 : 2 });
    const left = [`${run}new456`, `.y.json.${dead}.0123abcd.tmp`, `${run}link89`, 'outside'];
    if (process.getuid?.() === 0) left.push(`${run}other7`);
    expect(readdirSync(root).sort()).to.deep.equal(left.sort());
    expect(readdirSync(path.join(root, 'outside'))).to.deep.equal(['precious']);
  });
});
