import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseLsTree } from '../../src/runner/gitTestPack.js';
import { parseCatFileBatch } from '../../src/runner/git.js';
import { decideOutcome, describeExit, MAX_REPORT_BYTES, readReport, STOPPED_REASON, type ChildReport } from '../../src/runner/outcome.js';
import { parseProcStat } from '../../src/runner/processGroup.js';

const failed: ChildReport = { result: 'fail', failure_reason: 'AssertionError: no', traceback: 'Traceback ...' };

describe('runner: outcome of a test process', () => {
  it("takes the child's report: return -> pass (no reason), AssertionError -> fail with reason and traceback", () => {
    expect(decideOutcome({ exitStatus: 0, endedBy: null }, { result: 'pass', failure_reason: null, traceback: null }, 10, 'py')).to.deep.equal({
      result: 'pass',
      failure_reason: null,
      traceback: null,
      exit_status: 0,
    });
    expect(decideOutcome({ exitStatus: 1, endedBy: null }, failed, 10, 'py')).to.deep.equal({ ...failed, exit_status: 1 });
  });

  it('a timeout is an error "Timeout: test ran longer than <N> s", keeping the traceback of where the test was', () => {
    const o = decideOutcome({ exitStatus: 143, endedBy: 'timeout' }, { result: 'error', failure_reason: 'TestTerminated', traceback: 'in sleep' }, 1.5, 'py');
    expect(o).to.deep.equal({ result: 'error', failure_reason: 'Timeout: test ran longer than 1.5 s', traceback: 'in sleep', exit_status: 143 });
  });

  it('a stop is an error even when the test had reported a pass', () => {
    const o = decideOutcome({ exitStatus: 137, endedBy: 'stop' }, { result: 'pass', failure_reason: null, traceback: null }, 10, 'py');
    expect(o).to.deep.equal({ result: 'error', failure_reason: STOPPED_REASON, traceback: null, exit_status: 137 });
  });

  it('no report (crash, os._exit) is an error naming the exit status', () => {
    expect(decideOutcome({ exitStatus: 139, endedBy: null }, undefined, 10, 'py').failure_reason).to.equal(
      'Crash: the test process was killed by SIGSEGV (exit status 139) without reporting a result',
    );
    expect(decideOutcome({ exitStatus: 0, endedBy: null }, undefined, 10, 'py')).to.deep.include({ result: 'error', exit_status: 0 });
    expect(describeExit(3)).to.equal('exited with status 3');
    expect(describeExit(200)).to.equal('exited with status 200');
  });

  it('an interpreter that cannot start is an error with a null exit status', () => {
    const o = decideOutcome({ exitStatus: null, endedBy: null, spawnError: new Error('spawn /nope ENOENT') }, undefined, 10, '/nope');
    expect(o).to.deep.equal({ result: 'error', failure_reason: 'InfrastructureError: runner_timeout: could not start /nope: spawn /nope ENOENT', traceback: null, exit_status: null });
  });

  it('reads a report only when it has the expected shape', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-report-'));
    try {
      const file = path.join(dir, 'r.json');
      await writeFile(file, JSON.stringify(failed));
      expect(await readReport(file)).to.deep.equal(failed);
      for (const bad of ['{"result": "maybe"}', '{"result": "fail", "failure_reason": 3}', 'null', '{"resu', '[]']) {
        await writeFile(file, bad);
        expect(await readReport(file), bad).to.equal(undefined);
      }
      expect(await readReport(path.join(dir, 'missing.json'))).to.equal(undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a report the test replaced is no report, never a wedge: a FIFO (nobody writes), a symlink to a good report, one over 4 MiB', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-report-'));
    try {
      const fifo = path.join(dir, 'fifo.json');
      execFileSync('mkfifo', [fifo]);
      expect(await readReport(fifo)).to.equal(undefined);
      await writeFile(path.join(dir, 'good.json'), JSON.stringify(failed));
      await symlink(path.join(dir, 'good.json'), path.join(dir, 'link.json'));
      expect(await readReport(path.join(dir, 'link.json'))).to.equal(undefined);
      await writeFile(path.join(dir, 'big.json'), JSON.stringify({ ...failed, traceback: 'x'.repeat(MAX_REPORT_BYTES) }));
      expect(await readReport(path.join(dir, 'big.json'))).to.equal(undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('runner: git and /proc output parsers', () => {
  const oid = 'a'.repeat(40);

  it('splits `git cat-file --batch --follow-symlinks` answers, blobs only', () => {
    const out = Buffer.concat([
      Buffer.from(`${oid} blob 5\nhello\n`),
      Buffer.from(`${'b'.repeat(40)}:x y missing\n`),
      Buffer.from('symlink 13\n../etc/passwd\n'),
      Buffer.from(`${oid} tree 3\nabc\n`),
      Buffer.from(`${oid} blob 0\n\n`),
    ]);
    const answers = parseCatFileBatch(out, 6);
    expect(answers.map((b) => b?.toString())).to.deep.equal(['hello', undefined, undefined, undefined, '', undefined]);
  });

  it('parses `git ls-tree -z` entries, paths with spaces and newlines included', () => {
    const out = Buffer.from(`100644 blob ${oid}\ttests/a b.py\u{0}120000 blob ${oid}\tlink\u{0}040000 tree ${oid}\ttests/new\nline\0`);
    expect(parseLsTree(out)).to.deep.equal([
      { mode: '100644', type: 'blob', oid, path: 'tests/a b.py' },
      { mode: '120000', type: 'blob', oid, path: 'link' },
      { mode: '040000', type: 'tree', oid, path: 'tests/new\nline' },
    ]);
  });

  it('reads state, process group and start time from /proc/<pid>/stat, even when the name has spaces and parentheses', () => {
    const rest = '0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345 678';
    expect(parseProcStat(`1234 (python3) S 1 1234 1234 ${rest}`)).to.deep.equal({ state: 'S', pgrp: 1234, startTicks: 987654 });
    expect(parseProcStat(`99 (a) b (c)) Z 1 77 77 ${rest}`)).to.deep.equal({ state: 'Z', pgrp: 77, startTicks: 987654 });
    expect(parseProcStat(readFileSync('/proc/self/stat', 'latin1'))?.startTicks).to.be.a('number').and.greaterThan(0);
    expect(parseProcStat('garbage')).to.equal(undefined);
  });
});
