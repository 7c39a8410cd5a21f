/**
 * The fast lane (`npm run test:fast`, `.mocharc.fast.cjs`; docs/testing.md "Lanes") starts no daemon, no
 * PostgreSQL and no Chromium. The helpers that start them call `fullLaneOnly` first, so a test in the fast
 * lane that would start one fails at once, saying which lane it belongs to, instead of slowing the lane down.
 */
export const inFastLane = (): boolean => process.env.FARMHAND_TEST_LANE === 'fast';

export function fullLaneOnly(what: string): void {
  if (inFastLane()) {
    throw new Error(
      `${what} is not started in the fast lane (npm run test:fast: no daemon, PostgreSQL or Chromium). ` +
        "This test belongs to the full lane: add its file to `exclude` in .mocharc.fast.cjs (docs/testing.md, \"Lanes\").",
    );
  }
}
