/**
 * Root hooks for the whole suite (loaded by .mocharc.cjs): when a test fails, the end of the log of
 * every test daemon alive during it is printed, so a failure on a loaded CI machine can be read.
 */
import type { Context } from 'mocha';
import { dropStoppedLogs, printLogsOfTest, removeLogDir, testStarted } from './daemonLogs.js';

let test = 0;

export const mochaHooks = {
  beforeEach(): void {
    test = testStarted();
  },
  afterEach(this: Context): void {
    const t = this.currentTest;
    if (t?.state === 'failed') printLogsOfTest(test, `failed: ${t.fullTitle()}`);
    else dropStoppedLogs();
  },
  afterAll(): void {
    removeLogDir();
  },
};
