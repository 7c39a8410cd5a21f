/**
 * Starts the whole daemon for a test: a temporary data directory, a real git
 * test pack, real python3 children, real ffmpeg (testsrc2 at a small size),
 * listening on 127.0.0.1 port 0. Each test file builds its own.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { configSchema, type ConfigInput, type FarmConfig } from '../../src/config/schema.js';
import type { Logger } from '../../src/core/ports.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { daemonLogger, logTail } from './daemonLogs.js';
import { makeTestPack, type Files, type TestPackRepo } from '../fixtures/testPack.js';
import { checked } from './contract.js';
import { waitFor } from './wait.js';
import { fullLaneOnly } from './lane.js';

export interface TestDaemon {
  daemon: Daemon;
  url: string;
  http: ReturnType<typeof request>;
  pack: TestPackRepo;
  dataDir: string;
  config: FarmConfig;
  stop(): Promise<void>;
}

/** The config's sections but `test_pack`, whose `url` is the test's pack; its other settings may be given. */
export type TestConfig = Partial<Omit<ConfigInput, 'test_pack'>> & { test_pack?: Partial<Omit<NonNullable<ConfigInput['test_pack']>, 'url'>> };

export function testConfig(packDir: string, dataDir: string, overrides: TestConfig = {}): FarmConfig {
  const cfg = configSchema.parse({
    node_id: 'farmhand-test',
    listen: '127.0.0.1:0',
    data_dir: dataDir,
    log_level: 'silent',
    // Not the shipped limit: a suite sends requests as fast as the machine answers, and on a fast
    // idle machine a suite of many (bad-input) outran 20/s with a burst of 100. The limit's own
    // tests pass theirs; load-mixed passes the shipped defaults (`rate_limit: {}`).
    rate_limit: { requests_per_second: 1e6, burst: 1e6, artifact_burst: 1e6 },
    ...overrides,
    test_pack: { refresh_secs: 1, ...overrides.test_pack, url: packDir },
    // Recording costs CPU; the tests that check videos turn it on.
    capture: { uri: 'testsrc:', width: 320, height: 240, preview_fps: 10, record_video: false, ...overrides.capture },
    // Tests as the daemon's own user unless a test names a user: the suite runs as root, where the default would run
    // them as farmhand-test, whose processes every such daemon ends (test/helpers/testUser.ts holdSystemUser).
    runner: { kill_grace_secs: 1, stop_response_secs: 10, run_tests_as: false, ...overrides.runner },
  });
  return { ...cfg, node_id: cfg.node_id ?? 'farmhand-test' };
}

export async function startTestDaemon(opts: { files?: Files; config?: TestConfig; pack?: TestPackRepo; logger?: Logger } = {}): Promise<TestDaemon> {
  fullLaneOnly('a whole daemon (startTestDaemon)');
  const pack = opts.pack ?? (await makeTestPack(opts.files));
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-data-'));
  const config = testConfig(pack.dir, dataDir, opts.config);
  // A test that reads what the daemon logged passes its own logger (test/helpers/logger.ts).
  const log = opts.logger ? { logger: opts.logger, file: '', done: () => undefined } : daemonLogger();
  const daemon = await startDaemon(config, log.logger).catch((e: unknown) => {
    log.done();
    throw e;
  });
  const td: TestDaemon = {
    daemon,
    url: daemon.url,
    // Every response is checked against the OpenAPI document (test/helpers/contract.ts).
    http: checked(request(daemon.url)),
    pack,
    dataDir,
    config,
    async stop() {
      // The daemon running now: a test may have restarted it on the same data directory (td.daemon = ...).
      // A stop that does not end is a bug to read about, not only a mocha timeout: print the log.
      const slow = setTimeout(() => process.stderr.write(`\n----- test daemon still stopping after 30 s; end of its log -----\n${log.file ? logTail(log.file) : '(logged to the test\'s own logger)'}\n`), 30_000);
      try {
        await td.daemon.stop();
      } finally {
        clearTimeout(slow);
        log.done();
      }
      // Retried: under load a child the stop killed (a test, a recording's ffmpeg) may still be writing its last file
      // into the results folder as it is removed (ENOTEMPTY).
      await rm(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
      if (!opts.pack) await pack.cleanup();
    },
  };
  return td;
}

/** Wait until the capture pipeline delivers frames (a node is offline until then). */
export async function waitOnline(d: TestDaemon, timeoutMs = 15_000): Promise<void> {
  await waitFor(() => d.daemon.services.frames.health().online, { what: 'capture to come online', timeoutMs });
}

/** Poll a job (as a v1 client does) until it is exited; returns the last Job object. */
export async function waitForJob(d: TestDaemon, jobUid: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return waitFor(
    async () => {
      // The node itself, as a v1 client polls it (behind a portal too: v1 is the appliance's own API).
      const res = await checked(request(d.daemon.url)).get(`/api/v1/jobs${jobUid}`);
      if (res.status !== 200) throw new Error(`job status answered ${res.status}: ${res.text}`);
      return res.body.status === 'exited' ? (res.body as Record<string, unknown>) : undefined;
    },
    { what: `job ${jobUid} to end`, timeoutMs, intervalMs: 100 },
  );
}
