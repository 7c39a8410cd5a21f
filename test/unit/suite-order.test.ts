// The order of `npm test` (.mocharc.suite.cjs, test/helpers/suiteOrder.cjs; docs/testing.md "Where the time goes"):
// every test file exactly once, whatever test/suite-weights.json says, and the longest first.
import { expect } from 'chai';
import { createRequire } from 'node:module';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);
const order = require('../helpers/suiteOrder.cjs') as {
  suiteOrder: (w?: Record<string, number>, files?: string[]) => string[];
  weights: () => Record<string, number>;
  UNKNOWN_SECONDS: number;
};

describe('the order of npm test (longest files first)', () => {
  it('holds every file the glob test/**/*.test.ts finds, each once, and nothing else', () => {
    // mocha's own file collection, as `mocha 'test/**/*.test.ts'` ran before the order existed.
    const collect = require('mocha/lib/cli/collect-files.cjs') as (o: object) => { files: string[] };
    const { files } = collect({ spec: ['test/**/*.test.ts'], extension: ['ts'], ignore: [], file: [], recursive: false, sort: false, cwd: ROOT });
    const ordered = order.suiteOrder().map((f) => path.resolve(ROOT, f));
    expect(files.length).to.be.greaterThan(100);
    expect(new Set(ordered).size, 'no file twice').to.equal(ordered.length);
    expect([...ordered].sort()).to.deep.equal([...files].sort());
  });

  it('is .mocharc.suite.cjs`s spec, parallel, and npm test uses that config', () => {
    const config = require('../../.mocharc.suite.cjs') as { spec: string[]; parallel: boolean };
    expect(config.parallel).to.equal(true);
    expect(config.spec).to.deep.equal(order.suiteOrder());
    const pkg = require('../../package.json') as { scripts: Record<string, string> };
    expect(pkg.scripts.test).to.equal('mocha --config .mocharc.suite.cjs');
  });

  it('puts the heavier file first; a file without a weight counts as UNKNOWN_SECONDS; a weight of a file that is gone is ignored', () => {
    const w = { 'test/a.test.ts': 1, 'test/b.test.ts': 90, 'test/gone.test.ts': 500, 'test/c.test.ts': order.UNKNOWN_SECONDS + 1 };
    expect(order.suiteOrder(w, ['test/a.test.ts', 'test/b.test.ts', 'test/c.test.ts', 'test/new.test.ts'])).to.deep.equal([
      'test/b.test.ts',
      'test/c.test.ts',
      'test/new.test.ts',
      'test/a.test.ts',
    ]);
  });

  it('the weights file is a map of test files to seconds', () => {
    for (const [f, s] of Object.entries(order.weights())) {
      expect(f).to.match(/^test\/.+\.test\.ts$/);
      expect(s, f).to.be.a('number').and.at.least(0);
    }
  });
});
