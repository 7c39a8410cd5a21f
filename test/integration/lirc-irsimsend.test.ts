// Differential test of the LIRC encoder against LIRC itself: every file of
// Debian's lirc-compat-remotes goes through the real `irsimsend` (package
// lirc) and through our encoder, and the `simsend.out` texts must be equal
// byte for byte. irsimsend writes a fixed file name in its working
// directory, so every run gets its own temporary directory.
import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FarmError } from '../../src/core/errors.js';
import { LircEncoder, lircOrder, parseLircConfig, type LircRemote } from '../../src/hardware/ir/lirc/index.js';
import { listFileKey, simulateIrsimsend } from '../../src/hardware/ir/lirc/simsend.js';

const CORPUS = '/usr/share/lirc/remotes';
const CONCURRENCY = 4;

interface Run {
  status: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  stderr: string;
}

/** Run irsimsend in a fresh directory; `list` becomes a `-l` list file. */
async function irsimsend(base: string, file: string, count: number, list?: string[]): Promise<Run> {
  const cwd = await mkdtemp(join(base, 'run-'));
  const args = ['-c', String(count)];
  if (list) {
    await writeFile(join(cwd, 'keys.list'), list.map((k) => `${k}\n`).join(''));
    args.push('-l', join(cwd, 'keys.list'));
  }
  args.push(file);
  const child = spawn('irsimsend', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  const out = await readFile(join(cwd, 'simsend.out'), 'utf8').catch(() => '');
  await rm(cwd, { recursive: true, force: true });
  return { status, signal, out, stderr };
}

/** Map with at most `limit` promises in flight. */
async function pool<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await fn(items[i]!);
  };
  await Promise.all(Array.from({ length: limit }, worker));
  return results;
}

async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of (await readdir(dir)).sort()) {
    const p = join(dir, name);
    if ((await stat(p)).isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

/** The text of each `begin remote` ... `end remote` block, in file order. */
function splitRemotes(text: string): string[] {
  const blocks: string[] = [];
  let current: string[] | undefined;
  for (const line of text.split('\n')) {
    const words = line.trim().toLowerCase().split(/[ \t]+/);
    if (!line.startsWith('#') && words[0] === 'begin' && words[1] === 'remote') current = [];
    current?.push(line);
    if (current && !line.startsWith('#') && words[0] === 'end' && words[1] === 'remote') {
      blocks.push(`${current.join('\n')}\n`);
      current = undefined;
    }
  }
  return blocks;
}

/**
 * Keys for the sequence test: buttons irsimsend's list-file reader sees under
 * their own name and that are the first button of that name.
 */
function listableKeys(r: LircRemote): string[] {
  return r.codes
    .filter((c) => listFileKey(c.name) === c.name && Buffer.byteLength(c.name) < 32)
    .filter((c) => r.codes.find((d) => d.name.toLowerCase() === c.name.toLowerCase()) === c)
    .map((c) => c.name);
}

/** Same key twice (a repeat), then alternating keys (toggles flip on each press). */
const sequence = (a: string, b: string) => [a, a, b, a, b, b, a];

describe('LIRC encoder vs irsimsend, every file of lirc-compat-remotes', function () {
  // ~500 irsimsend processes: a correctness check, not a speed check; a loaded 2-core CI box needs minutes.
  this.timeout(600_000);
  let base: string;
  let files: string[];
  let matched = 0;

  before(async () => {
    const probe = spawnSync('irsimsend', ['-v'], { encoding: 'utf8' });
    if (probe.error) throw new Error(`irsimsend is missing (install Debian package "lirc"): ${probe.error.message}`);
    files = await walk(CORPUS).catch(() => []);
    if (files.length === 0) throw new Error(`${CORPUS} is empty: install Debian package "lirc-compat-remotes"`);
    base = await mkdtemp(join(tmpdir(), 'farmhand-lirc-'));
  });

  after(async () => {
    if (base) await rm(base, { recursive: true, force: true });
    console.log(`      irsimsend runs matched byte for byte: ${matched}`);
  });

  it('the corpus holds the ~100 files Debian ships', () => {
    expect(files.length).to.be.greaterThan(90);
  });

  it('every file irsimsend cannot read is refused with file and line; every other file parses', async () => {
    const runs = await pool(files, CONCURRENCY, (f) => irsimsend(base, f, 1));
    let refused = 0;
    for (const [i, f] of files.entries()) {
      const text = await readFile(f, 'latin1');
      const lircRefuses = runs[i]!.status === 1 && runs[i]!.stderr.includes('Cannot parse');
      let ours: unknown;
      try {
        parseLircConfig(text, f);
      } catch (e) {
        ours = e;
      }
      if (lircRefuses) {
        refused++;
        expect(ours, f).to.be.instanceOf(FarmError);
        expect((ours as FarmError).code, f).to.equal('invalid_request');
        expect((ours as FarmError).message, f).to.match(new RegExp(`^${f.replace(/[.+]/g, '\\$&')}:\\d+: `));
      } else {
        expect(ours, `${f}: ${(ours as Error | undefined)?.message}`).to.equal(undefined);
      }
    }
    // lircmd.conf and lircrc files live in the same folders and are not lircd.conf files.
    expect(refused).to.be.greaterThan(10);
  });

  for (const count of [1, 3]) {
    it(`every key of every remote, -c ${count}: our simsend.out equals irsimsend's`, async () => {
      const parsed = await Promise.all(files.map(async (f) => tryParse(await readFile(f, 'latin1'), f)));
      const todo = files.filter((_f, i) => parsed[i] !== undefined);
      const runs = await pool(todo, CONCURRENCY, (f) => irsimsend(base, f, count));
      const mismatches: string[] = [];
      for (const [i, f] of todo.entries()) {
        const ours = simulateIrsimsend(parsed[files.indexOf(f)]!, { count });
        if (ours === runs[i]!.out) matched++;
        else mismatches.push(firstDifference(f, ours, runs[i]!.out));
      }
      expect(mismatches).to.deep.equal([]);
      expect(todo.length).to.be.greaterThan(60);
    });
  }

  it('every remote in its own file: a key twice (repeat), then alternating keys (toggles), -c 1 and -c 2', async () => {
    const cases: { file: string; remote: LircRemote; keys: string[]; count: number }[] = [];
    for (const f of files) {
      const text = await readFile(f, 'latin1');
      if (!tryParse(text, f)) continue;
      for (const [n, block] of splitRemotes(text).entries()) {
        const split = join(base, `${n}-${f.split('/').pop()}`);
        await writeFile(split, block, 'latin1');
        const remote = parseLircConfig(block, split)[0]!;
        const keys = listableKeys(remote);
        if (keys.length === 0) continue;
        const seq = sequence(keys[0]!, keys[1] ?? keys[0]!);
        for (const count of [1, 2]) cases.push({ file: split, remote, keys: seq, count });
      }
    }
    const runs = await pool(cases, CONCURRENCY, (c) => irsimsend(base, c.file, c.count, c.keys));
    const mismatches: string[] = [];
    for (const [i, c] of cases.entries()) {
      const ours = simulateIrsimsend([c.remote], { count: c.count, list: c.keys });
      if (ours === runs[i]!.out) matched++;
      else mismatches.push(firstDifference(`${c.file} ${c.keys.join(',')} -c ${c.count}`, ours, runs[i]!.out));
    }
    expect(mismatches).to.deep.equal([]);
    expect(cases.length).to.be.greaterThan(100);
  });

  it('remotes LIRC can only receive (no timings) are refused; irsimsend writes "code" lines for them', async () => {
    let seen = 0;
    for (const f of files) {
      const remotes = tryParse(await readFile(f, 'latin1'), f) ?? [];
      const first = lircOrder(remotes)[0];
      if (!first || first.zero.pulse !== 0 || first.zero.space !== 0 || first.codes.length === 0) continue;
      seen++;
      expect(() => new LircEncoder(first), f).to.throw(FarmError, /no timings/);
      const run = await irsimsend(base, f, 1, [first.codes[0]!.name]);
      expect(run.out, f).to.match(/^code -?\d+\n/);
    }
    expect(seen).to.be.greaterThan(10);
  });
});

function tryParse(text: string, file: string): LircRemote[] | undefined {
  try {
    return parseLircConfig(text, file);
  } catch {
    return undefined;
  }
}

function firstDifference(label: string, ours: string, theirs: string): string {
  const a = ours.split('\n');
  const b = theirs.split('\n');
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return `${label}: line ${i + 1}: ours ${JSON.stringify(a[i])}, irsimsend ${JSON.stringify(b[i])}`;
}
