// The fast lane (`npm run test:fast`, .mocharc.fast.cjs; docs/testing.md "Lanes"): which files it runs, that none
// of them reaches the helpers that start a daemon, PostgreSQL or Chromium, and that those helpers refuse to start
// in the lane.
import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Whether mocha started this process as the fast lane (before this file read the lane's config). */
const inLaneAtStart = process.env.FARMHAND_TEST_LANE === 'fast';
const require = createRequire(import.meta.url);

interface LaneConfig {
  spec: string[];
  exclude: string[];
  require: string[];
}

/** `dir/**\/*.test.ts` or a literal path, as the lane's config writes them. */
function expand(spec: string): string[] {
  const m = /^(.+)\/\*\*\/\*\.test\.ts$/.exec(spec);
  if (!m) {
    expect(spec, 'a literal spec').to.match(/\.test\.ts$/);
    return [spec];
  }
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(ROOT, dir))) {
      const rel = `${dir}/${name}`;
      if (statSync(path.join(ROOT, rel)).isDirectory()) walk(rel);
      else if (name.endsWith('.test.ts')) out.push(rel);
    }
  };
  walk(m[1]!);
  return out;
}

/** Every file of test/ a file imports, directly or not (value imports only: `import type` loads nothing). */
function testImports(file: string, seen = new Set<string>()): Set<string> {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  for (const m of text.matchAll(/^import\s+(?!type\s)[^'"]*?from\s+'(\.[^']+)'|^import\s+'(\.[^']+)'/gm)) {
    const spec = (m[1] ?? m[2])!;
    const target = path.relative(ROOT, path.resolve(path.dirname(path.join(ROOT, file)), spec.replace(/\.js$/, '.ts')));
    if (!target.startsWith('test/') || seen.has(target)) continue;
    seen.add(target);
    testImports(target, seen);
  }
  return seen;
}

/** The helpers that start what the fast lane never starts (a build of dist/ runs tsc over the whole tree). */
const HEAVY = ['test/helpers/daemon.ts', 'test/helpers/postgres.ts', 'test/helpers/browser.ts', 'test/helpers/build.ts'];

describe('test lanes: the fast lane', () => {
  const config = require(path.join(ROOT, '.mocharc.fast.cjs')) as LaneConfig;
  const files = config.spec.flatMap(expand).filter((f) => !config.exclude.includes(f));

  it('is `npm run test:fast`: the suite`s root hooks, test/unit and the listed in-process files, less the excluded', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['test:fast']).to.equal('mocha --config .mocharc.fast.cjs');
    // The full suite stays what CI runs: every test file (in parallel worker processes, longest first, docs/testing.md;
    // test/unit/suite-order.test.ts checks that its spec is every test/**/*.test.ts).
    expect(pkg.scripts.test).to.equal('mocha --config .mocharc.suite.cjs');
    expect(config.require).to.deep.equal([...(require(path.join(ROOT, '.mocharc.cjs')) as LaneConfig).require, 'test/helpers/fastLane.ts']);
    // Reading the lane's config does not put this process in the lane (the full suite loads this file too).
    expect(process.env.FARMHAND_TEST_LANE === 'fast', 'reading .mocharc.fast.cjs put the process in the fast lane').to.equal(inLaneAtStart);
    expect(files).to.include('test/unit/test-lanes.test.ts');
    for (const f of config.exclude) expect(config.spec.flatMap(expand), `excluded ${f} exists`).to.include(f);
    expect(files.length).to.be.greaterThan(50);
  });

  it('runs no file that imports the helpers starting a daemon, PostgreSQL or Chromium (or building dist/), directly or through another helper', () => {
    const offenders = files.flatMap((f) => {
      const reached = [...testImports(f)].filter((t) => HEAVY.includes(t));
      return reached.length ? [`${f} -> ${reached.join(', ')}`] : [];
    });
    expect(offenders).to.deep.equal([]);
    // The check itself: the two excluded unit files do reach them.
    expect([...testImports('test/unit/result-page.test.ts')]).to.include('test/helpers/daemon.ts');
    expect([...testImports('test/unit/systemd.test.ts')]).to.include('test/helpers/build.ts');
  });

  it('those helpers refuse to start anything in the fast lane, naming the lane the test belongs to', async () => {
    const before = process.env.FARMHAND_TEST_LANE;
    process.env.FARMHAND_TEST_LANE = 'fast';
    try {
      // Imported here, not at the top: this file must not load them itself (the check above).
      const { startTestDaemon } = await import('../helpers/daemon.js');
      const { startPostgres } = await import('../helpers/postgres.js');
      const { launchBrowser } = await import('../helpers/browser.js');
      const { ensureBuilt } = await import('../helpers/build.js');
      for (const [what, start] of [
        ['startTestDaemon', () => startTestDaemon()],
        ['startPostgres', () => startPostgres()],
        ['launchBrowser', () => launchBrowser()],
        ['ensureBuilt', () => ensureBuilt()],
      ] as const) {
        const e = await Promise.resolve()
          .then(start as () => Promise<unknown>)
          .then(
            () => expect.fail(`${what} started in the fast lane`),
            (err: unknown) => err as Error,
          );
        expect(e.message, what).to.include(what).and.include('the full lane').and.include('.mocharc.fast.cjs');
      }
    } finally {
      if (before === undefined) delete process.env.FARMHAND_TEST_LANE;
      else process.env.FARMHAND_TEST_LANE = before;
    }
  });
});
