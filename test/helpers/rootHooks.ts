/**
 * Root hooks for the whole suite (loaded by .mocharc.cjs): when a test fails, the end of the log of
 * every test daemon alive during it is printed, so a failure on a loaded CI machine can be read.
 *
 * `npm test` runs the files in parallel worker processes (docs/testing.md, "Where the time goes"). A worker
 * ends when the run ends, whatever it still has running, so a handle a file leaves open (a server, a ref'd
 * timer, a child process) no longer shows as mocha never exiting, as it does in a serial run. In a worker, the
 * root hooks run once per file: each file's handles that keep the event loop alive are counted before it and
 * after it, and a file that leaves more than it found gets a warning naming it and what it left.
 */
import type { Context } from 'mocha';
import { dropStoppedLogs, printLogsOfTest, removeLogDir, testStarted } from './daemonLogs.js';

let test = 0;

/** A mocha worker process (--parallel): the script run is mocha's worker. */
const inWorker = /[\\/]mocha[\\/]lib[\\/]nodejs[\\/]worker\.c?js$/.test(process.argv[1] ?? '');

/**
 * The handles that keep the event loop alive, by kind, as process.getActiveResourcesInfo counts them (only ref'd
 * ones). Requests in flight (FSReqCallback, CloseReq, ...) end by themselves and are left out.
 */
function resources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) if (!/Req/.test(r)) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

function excess(before: Map<string, number>): string[] {
  return [...resources()].filter(([k, n]) => n > (before.get(k) ?? 0)).map(([k, n]) => `${k} (${n - (before.get(k) ?? 0)})`);
}

let atStart = new Map<string, number>();

export const mochaHooks = {
  async beforeAll(): Promise<void> {
    // Inside an async hook, as the check after: mocha's timer for the running hook is in both counts.
    if (inWorker) atStart = resources();
  },
  beforeEach(): void {
    test = testStarted();
  },
  afterEach(this: Context): void {
    const t = this.currentTest;
    if (t?.state === 'failed') printLogsOfTest(test, `failed: ${t.fullTitle()}`);
    else dropStoppedLogs();
  },
  async afterAll(this: Context): Promise<void> {
    removeLogDir();
    if (!inWorker) return;
    // Sockets and children close a moment after the call that closes them: give them up to 3 s.
    let left = excess(atStart);
    for (let waited = 0; left.length && waited < 3000; waited += 100) {
      await new Promise((r) => setTimeout(r, 100));
      left = excess(atStart);
    }
    if (left.length) {
      const file = this.test?.parent?.suites[0]?.file ?? '(a test file)';
      process.stderr.write(`\nwarning: ${file} left what keeps a process alive, 3 s after its last hook: ${left.join(', ')} (in a serial run, mocha waits for it to end)\n`);
    }
  },
};
