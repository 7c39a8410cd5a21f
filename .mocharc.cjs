// mocha runs the TypeScript sources through tsx; no build step before tests.
// `exit` stays off on purpose: a leaked handle shows up as a hang instead of hiding.
module.exports = {
  'node-option': ['import=tsx'],
  require: ['test/helpers/rootHooks.ts'],
  timeout: 20000,
  reporter: 'spec',
};
