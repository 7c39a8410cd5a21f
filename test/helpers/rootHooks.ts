/**
 * Root hooks for the whole suite (loaded by .mocharc.cjs): when a test fails, the end of the log of
 * every test daemon alive during it is printed, so a failure on a loaded CI machine can be read.
 */
import type { Context } from 'mocha';
import { dropStoppedLogs, printLogsOfSpan, removeLogDir } from './daemonLogs.js';

let testStart = Date.now();

export const mochaHooks = {
  beforeEach(): void {
    testStart = Date.now();
  },
  afterEach(this: Context): void {
    const t = this.currentTest;
    if (t?.state === 'failed') printLogsOfSpan(testStart, Date.now(), `failed: ${t.fullTitle()}`);
    else dropStoppedLogs();
  },
  afterAll(): void {
    removeLogDir();
  },
};
