// mocha runs the TypeScript sources through tsx; no build step before tests.
// `exit` stays off on purpose: a leaked handle shows up as a hang instead of hiding (in a parallel run, as a warning
// naming the file: test/helpers/rootHooks.ts).
// contractHooks fails a test whose responses break the OpenAPI document (docs/openapi.md).
// `npm test` adds --parallel: the files run in `jobs` worker processes (FARMHAND_TEST_JOBS, default 2), since most of
// the suite's time is waiting (docs/testing.md, "Where the time goes"); `npx mocha <file>` stays one serial process.
// FARMHAND_PROFILE_SUITE=1 adds, after the spec output, where the time went (test/helpers/suiteProfile.cjs).
module.exports = {
  'node-option': ['import=tsx'],
  require: ['test/helpers/rootHooks.ts', 'test/helpers/contractHooks.ts'],
  timeout: 20000,
  jobs: Number(process.env.FARMHAND_TEST_JOBS) || 2,
  reporter: process.env.FARMHAND_PROFILE_SUITE ? './test/helpers/suiteProfile.cjs' : 'spec',
};
