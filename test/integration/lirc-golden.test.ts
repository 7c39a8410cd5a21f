// The encoder against the shared corpus of harder remote files and their
// reference encodings (produced by irsimsend from Debian's lirc 0.10.1). That
// corpus is not part of the repository: it is read from `../shared/lirc-remotes`
// beside the repository when it exists; otherwise the suite is one pending test whose title says so (and
// `.ci/run` fails before the suite when CI lacks it).
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseLircConfig } from '../../src/hardware/ir/lirc/index.js';
import { simulateIrsimsend } from '../../src/hardware/ir/lirc/simsend.js';

const CORPUS = fileURLToPath(new URL('../../../shared/lirc-remotes', import.meta.url));

interface Frame {
  durations: number[];
  gap: number;
}
interface GoldenCase {
  keys: string | string[];
  count: number;
  frames: Frame[];
}
interface Golden {
  file: string;
  remotes: { name: string; flags: string; cases: GoldenCase[] }[];
}

/**
 * The golden frames as the simsend.out text they were cut from. A frame
 * whose durations end on a space has absorbed its trailing gap (the cutter
 * only splits at long spaces) and carries a placeholder gap of 0.
 */
function goldenText(frames: Frame[]): string {
  const values = frames.flatMap((f) => (f.durations.length % 2 ? [...f.durations, f.gap] : f.durations));
  return values.map((d, i) => `${i % 2 ? 'space' : 'pulse'} ${d}\n`).join('');
}

describe('LIRC encoder vs the shared golden corpus (../shared/lirc-remotes)', function () {
  this.timeout(30000);

  if (!existsSync(join(CORPUS, 'golden'))) {
    // A test without a function is pending: mocha lists it, with its title, under "pending".
    it(`NOT RUN: the shared corpus ../shared/lirc-remotes is absent (looked for ${join(CORPUS, 'golden')}); CI fails without it`);
    return;
  }

  it('every case of every golden file matches irsimsend\'s reference output', async () => {
    const mismatches: string[] = [];
    let cases = 0;
    let matched = 0;
    for (const name of (await readdir(join(CORPUS, 'golden'))).sort()) {
      const golden = JSON.parse(await readFile(join(CORPUS, 'golden', name), 'utf8')) as Golden;
      const remotes = parseLircConfig(await readFile(join(CORPUS, 'files', golden.file), 'latin1'), golden.file);
      expect(remotes.map((r) => r.name), golden.file).to.deep.equal(golden.remotes.map((r) => r.name));
      for (const [i, g] of golden.remotes.entries()) {
        for (const c of g.cases) {
          cases++;
          // The golden runs used split files: one remote per run.
          const opts = typeof c.keys === 'string' ? { keysym: c.keys } : { list: c.keys };
          const ours = simulateIrsimsend([remotes[i]!], { count: c.count, ...opts });
          if (ours === goldenText(c.frames)) matched++;
          else mismatches.push(`${golden.file} ${g.name} ${JSON.stringify(c.keys)} -c ${c.count}`);
        }
      }
    }
    console.log(`      golden cases matched: ${matched}/${cases}`);
    expect(mismatches).to.deep.equal([]);
    expect(cases).to.be.greaterThan(900);
  });
});
