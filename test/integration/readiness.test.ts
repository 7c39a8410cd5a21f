/**
 * Start-up waits for capture's first frame (bounded by
 * capture.first_frame_wait_secs) before it answers requests, so run_tests
 * sent the moment the daemon is up is accepted; while it waits /healthz
 * answers and /readyz says "starting"; past the bound the daemon starts
 * offline and says why. The first frame is held back by a real gate: the
 * configured "ffmpeg" is a script that waits on a FIFO the test opens, then
 * runs the real ffmpeg.
 */
import { expect } from 'chai';
import { execFile, spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import request from 'supertest';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, testConfig, waitForJob, type TestConfig, type TestDaemon } from '../helpers/daemon.js';
import { notifySocket } from '../helpers/notifySocket.js';
import { waitFor } from '../helpers/wait.js';

const PASS = 'tests/basic.py::test_pass';
const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

/** A port free a moment ago (the daemon must listen on a known port while it is still starting). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

describe('start-up readiness (real daemon, real ffmpeg behind a gate)', function () {
  this.timeout(180_000);
  let dir: string;
  let pack: TestPackRepo;
  let gate: string;
  let gatedFfmpeg: string;
  const running: Array<Daemon | TestDaemon> = [];
  let gates = 0;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-readiness-'));
    pack = await makeTestPack();
  });
  beforeEach(async () => {
    // A fresh FIFO per test: ffmpeg starts only once a line is written to it.
    gate = path.join(dir, `gate-${++gates}`);
    await promisify(execFile)('mkfifo', [gate]);
    gatedFfmpeg = path.join(dir, `ffmpeg-gated-${path.basename(gate)}`);
    await writeFile(gatedFfmpeg, `#!/bin/sh\nread _ < '${gate}'\nexec ffmpeg "$@"\n`);
    await chmod(gatedFfmpeg, 0o755);
  });
  afterEach(async () => {
    for (const d of running.splice(0)) await d.stop();
  });
  after(async () => {
    await pack?.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  /** startDaemon on a fresh data directory and a known port, not awaited. */
  async function startOn(config: TestConfig): Promise<{ url: string; starting: Promise<Daemon> }> {
    const port = await freePort();
    const dataDir = await mkdtemp(path.join(dir, 'data-'));
    const cfg = testConfig(pack.dir, dataDir, { ...config, listen: `127.0.0.1:${port}` });
    const starting = startDaemon(cfg, silentLogger);
    starting.then((d) => running.push(d), () => undefined);
    return { url: `http://127.0.0.1:${port}`, starting };
  }

  it('accepts run_tests right after startDaemon resolves (no 503 "waiting for the first frame")', async () => {
    const d = await startTestDaemon({ pack });
    running.push(d);
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
    expect(res.status, res.text).to.equal(200);
    expect((await waitForJob(d, res.body.job_uid, 120_000)).status).to.equal('exited');
  });

  it('while waiting for the first frame: /healthz 200 starting, /readyz 503 startup, run_tests 503; then ready', async () => {
    const { url, starting } = await startOn({ capture: { ffmpeg: gatedFfmpeg, first_frame_wait_secs: 600 } });
    const http = request(url);
    const health = await waitFor(
      async () => {
        const r = await http.get('/healthz');
        return r.status === 200 ? r : undefined;
      },
      { what: 'the port to answer /healthz', timeoutMs: 60_000 },
    );
    expect(health.body).to.include({ status: 'ok', starting: true });
    const ready = await http.get('/readyz');
    expect(ready.status).to.equal(503);
    expect(ready.body).to.include({ error: 'not_ready', ready: false });
    expect(ready.body.failed).to.deep.equal(['startup']);
    const early = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
    expect(early.status).to.equal(503);
    expect(early.body.error).to.equal('device_unavailable');

    await writeFile(gate, 'go\n'); // ffmpeg starts: the first frame follows
    await starting;
    const res = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
    expect(res.status, res.text).to.equal(200);
    const nowReady = await http.get('/readyz');
    expect(nowReady.status, nowReady.text).to.equal(200);
    expect(nowReady.body).to.include({ ready: true });
  });

  it('past capture.first_frame_wait_secs it starts anyway, offline, and says why', async () => {
    const { url, starting } = await startOn({ capture: { ffmpeg: gatedFfmpeg, first_frame_wait_secs: 1 } });
    await starting; // the gate is never opened: no frame ever comes
    const http = request(url);
    expect((await http.get('/healthz')).body).to.include({ status: 'ok', starting: false });
    const ready = await http.get('/readyz');
    expect(ready.status).to.equal(503);
    expect(ready.body.failed).to.include('capture');
    expect(ready.body.checks.capture.detail).to.match(/^no frames: /);
    const run = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
    expect(run.status).to.equal(503);
    expect(run.body.error).to.equal('device_unavailable');
    const metrics = (await http.get('/metrics')).text;
    expect(metrics).to.match(/^farmhand_node_online 0$/m);
    expect(metrics).to.match(/^farmhand_capture_signal\{state="none"\} 1$/m);
  });

  it('farmhand serve tells systemd READY=1 only after the first frame, with the readiness in STATUS', async () => {
    const port = await freePort();
    const dataDir = await mkdtemp(path.join(dir, 'data-'));
    const cfg = testConfig(pack.dir, dataDir, { listen: `127.0.0.1:${port}`, capture: { ffmpeg: gatedFfmpeg, first_frame_wait_secs: 600 } });
    const configFile = path.join(dir, `farmhand-${port}.json`);
    await writeFile(configFile, JSON.stringify(cfg));
    const socket = await notifySocket(path.join(dir, `notify-${port}`));
    const serve = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--config', configFile], {
      env: { ...process.env, NOTIFY_SOCKET: path.join(dir, `notify-${port}`) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const exited = new Promise((resolve) => serve.once('close', resolve));
    try {
      const http = request(`http://127.0.0.1:${port}`);
      await waitFor(async () => (await http.get('/healthz')).body.starting === true, { what: 'the daemon to be waiting for its first frame', timeoutMs: 60_000 });
      // Still starting: READY cannot have been sent.
      expect(socket.messages.filter((m) => m.startsWith('READY=1'))).to.deep.equal([]);
      await writeFile(gate, 'go\n');
      const ready = await waitFor(() => socket.messages.find((m) => m.startsWith('READY=1')), { what: 'READY=1', timeoutMs: 60_000 });
      expect(ready).to.match(/\nSTATUS=listening on http:\/\/127\.0\.0\.1:\d+; ready\n/);
      const res = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
      expect(res.status, res.text).to.equal(200);
      await waitFor(async () => (await http.get(`/api/v1/jobs${res.body.job_uid}`)).body.status === 'exited', { what: 'the job to end', timeoutMs: 120_000 });
    } finally {
      serve.kill('SIGTERM');
      await exited;
      socket.child.kill();
    }
  });
});
