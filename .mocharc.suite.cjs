// `npm test`: the whole suite (every test/**/*.test.ts) in parallel worker processes, the longest files first, so
// that no long file starts last and runs alone at the end (test/helpers/suiteOrder.cjs; docs/testing.md,
// "Where the time goes"). Everything else is .mocharc.cjs. A spec here adds to any given on the command line, which
// is why `npx mocha <file>` keeps .mocharc.cjs, which has none.
const base = require('./.mocharc.cjs');
const { suiteOrder } = require('./test/helpers/suiteOrder.cjs');

module.exports = { ...base, parallel: true, spec: suiteOrder() };
