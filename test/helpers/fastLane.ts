/**
 * Loaded first by the fast lane's config (.mocharc.fast.cjs) and by nothing else: marks this process as the fast
 * lane, so the helpers that start a daemon, PostgreSQL or Chromium, or build dist/, refuse to (lane.ts). Set here,
 * not in the config file, so that reading the config (test/unit/test-lanes.test.ts) changes nothing.
 */
process.env.FARMHAND_TEST_LANE = 'fast';

export const mochaHooks = {};
