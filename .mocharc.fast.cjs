// The fast lane (`npm run test:fast`, docs/testing.md "Lanes"): unit tests and in-process HTTP tests, no daemon,
// no PostgreSQL, no Chromium. Every file under test/unit/ is in it unless excluded below; the few in-process files of
// other folders are listed. The helpers that start a daemon, a PostgreSQL cluster or Chromium, or build dist/, refuse to in this lane
// (test/helpers/lane.ts), so a test that does belongs to the full lane: add its file to `exclude`.
const base = require('./.mocharc.cjs');

module.exports = {
  ...base,
  // Marks the process as the fast lane (FARMHAND_TEST_LANE=fast) before any test file loads.
  require: [...base.require, 'test/helpers/fastLane.ts'],
  spec: [
    'test/unit/**/*.test.ts',
    'test/web/liveStream.test.ts',
    'test/integration/control-server.test.ts',
    'test/integration/control-stbt-ops.test.ts',
    'test/integration/webhooks.test.ts',
  ],
  exclude: [
    // A whole daemon (startTestDaemon) behind the result page.
    'test/unit/result-page.test.ts',
    // Builds dist/ (tsc over the whole tree) to check what gets installed.
    'test/unit/systemd.test.ts',
  ],
};
