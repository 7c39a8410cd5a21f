// mocha runs the TypeScript sources through tsx; no build step before tests.
// `exit` stays off on purpose: a leaked handle shows up as a hang instead of hiding.
// contractHooks fails a test whose responses break the OpenAPI document (docs/openapi.md).
module.exports = {
  'node-option': ['import=tsx'],
  require: ['test/helpers/rootHooks.ts', 'test/helpers/contractHooks.ts'],
  timeout: 20000,
  reporter: 'spec',
};
