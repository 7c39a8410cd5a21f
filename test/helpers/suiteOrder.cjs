// The order in which `npm test` hands its files to the parallel workers (.mocharc.suite.cjs; docs/testing.md,
// "Where the time goes"): every test/**/*.test.ts, the longest first. mocha --parallel gives each worker the next
// file in the order it was given, so a long file given last is the run's tail, one worker busy and the other idle;
// longest first keeps both busy to the end. The lengths are test/suite-weights.json: each file's seconds in a
// profile of the suite (scripts/suite-weights.cjs writes it from `FARMHAND_PROFILE_SUITE=/tmp/p.json npm test`).
// A file it does not name (a new one) counts as UNKNOWN_SECONDS; a name it has that no longer exists is ignored.
// Only the order depends on the weights: the set of files is whatever the glob finds. CommonJS: loaded by mocha's
// config, before tsx.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const UNKNOWN_SECONDS = 5;

/** Every test file under test/, as paths relative to the repository ("test/x/y.test.ts"), sorted by name. */
function testFiles() {
  return fs
    .readdirSync(path.join(ROOT, 'test'), { recursive: true })
    .map((f) => path.posix.join('test', String(f).split(path.sep).join('/')))
    .filter((f) => f.endsWith('.test.ts') && !f.split('/').includes('node_modules'))
    .sort((a, b) => a.localeCompare(b, 'en'));
}

/** test/suite-weights.json: { "test/x.test.ts": seconds }. */
function weights() {
  return JSON.parse(fs.readFileSync(path.join(ROOT, 'test', 'suite-weights.json'), 'utf8'));
}

/** The test files, longest first (by name among equals). */
function suiteOrder(w = weights(), files = testFiles()) {
  const of = (f) => (typeof w[f] === 'number' ? w[f] : UNKNOWN_SECONDS);
  return [...files].sort((a, b) => of(b) - of(a) || a.localeCompare(b, 'en'));
}

module.exports = { suiteOrder, testFiles, weights, UNKNOWN_SECONDS };
