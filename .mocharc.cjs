// mocha runs the TypeScript sources through tsx; no build step before tests.
// `exit` stays off on purpose: a leaked handle shows up as a hang instead of hiding.
// contractHooks fails a test whose responses break the OpenAPI document (docs/openapi.md).
// FARMHAND_PROFILE_SUITE=1 adds, after the spec output, where the time went (test/helpers/suiteProfile.cjs).
module.exports = {
  'node-option': ['import=tsx'],
  require: ['test/helpers/rootHooks.ts', 'test/helpers/contractHooks.ts'],
  timeout: 20000,
  reporter: process.env.FARMHAND_PROFILE_SUITE ? './test/helpers/suiteProfile.cjs' : 'spec',
};
