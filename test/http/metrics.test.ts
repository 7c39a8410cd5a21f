/**
 * /metrics, /healthz and /readyz on a real daemon that has run jobs (a pass,
 * a fail, an error) and pressed a key: the exposition passes Prometheus's own
 * `promtool check metrics`, the series move with what the node did, and no
 * label carries an id. The alert rules of docs/operations.md pass
 * `promtool check rules`.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { needsToken } from '../../src/http/auth.js';
import { INFRASTRUCTURE_KINDS } from '../../src/core/infrastructure.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { necRemote } from '../fixtures/remotes.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PASS = 'tests/basic.py::test_pass';
const FAIL = 'tests/basic.py::test_fail';
const ERROR = 'tests/basic.py::test_error';

/** Run promtool with `input` on stdin; resolves with its exit code and output. */
function promtool(args: string[], input = ''): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
    child.stdin.end(input);
  });
}

/** The value of one series (`name{a="b",...}` exactly as exposed), or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics and health endpoints', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let atStart: string;
  let afterJobs: string;

  before(async () => {
    d = await startTestDaemon({
      files: { ...STANDARD_FILES, 'config/remote-control/tv.lircd.conf': necRemote('tv', 0x20df, { KEY_OK: 0x22dd }) },
      config: { ir: { uri: 'virtual:' } },
    });
    const first = await d.http.get('/metrics');
    expect(first.status, first.text).to.equal(200);
    atStart = first.text;
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS, FAIL, ERROR] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 120_000);
    const alice = await asUser(d, 'alice');
    const press = await alice.post(`/api/v2/nodes/${d.config.node_id}/press`).send({ key: 'KEY_OK', remote_control: 'tv', test_pack_revision: 'main' });
    expect(press.status, press.text).to.equal(204);
    afterJobs = (await d.http.get('/metrics')).text;
  });
  after(() => d?.stop());

  it('serves the Prometheus text format, which promtool check metrics accepts', async () => {
    const res = await d.http.get('/metrics');
    expect(res.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
    const check = await promtool(['check', 'metrics'], afterJobs);
    expect(check.code, check.out).to.equal(0);
  });

  it('counts each recorded run by outcome, with its duration, and the results stored', () => {
    for (const outcome of ['pass', 'fail', 'error']) {
      expect(sample(atStart, `farmhand_test_runs_total{outcome="${outcome}"}`), outcome).to.equal(0);
      expect(sample(afterJobs, `farmhand_test_runs_total{outcome="${outcome}"}`), outcome).to.equal(1);
      expect(sample(afterJobs, `farmhand_test_run_duration_seconds_count{outcome="${outcome}"}`), outcome).to.equal(1);
    }
    expect(sample(atStart, 'farmhand_results_stored')).to.equal(0);
    expect(sample(afterJobs, 'farmhand_results_stored')).to.equal(3);
  });

  it('counts key presses by transport with their latency', () => {
    expect(sample(atStart, 'farmhand_key_presses_total{transport="virtual",outcome="ok"}')).to.equal(0);
    expect(sample(afterJobs, 'farmhand_key_presses_total{transport="virtual",outcome="ok"}')).to.equal(1);
    expect(sample(afterJobs, 'farmhand_key_press_duration_seconds_count{transport="virtual"}')).to.equal(1);
  });

  it('exports every state from the start, at zero: infrastructure kinds, signal states, node state', () => {
    for (const kind of INFRASTRUCTURE_KINDS) expect(sample(atStart, `farmhand_infrastructure_errors_total{kind="${kind}"}`), kind).to.equal(0);
    const signals = ['ok', 'black', 'frozen', 'none'].map((state) => sample(afterJobs, `farmhand_capture_signal{state="${state}"}`));
    expect(signals).to.not.include(undefined);
    expect(signals.reduce((a, b) => a! + b!, 0)).to.equal(1);
    expect(sample(afterJobs, 'farmhand_node_online')).to.equal(1);
    expect(sample(afterJobs, 'farmhand_node_available')).to.equal(1);
    expect(sample(afterJobs, 'farmhand_node_reserved')).to.equal(0);
    expect(sample(afterJobs, 'farmhand_node_running')).to.equal(0);
    expect(sample(afterJobs, 'farmhand_capture_frames_received_total')).to.be.greaterThan(0);
    expect(sample(afterJobs, 'farmhand_data_dir_free_bytes')).to.be.greaterThan(0);
    expect(afterJobs).to.match(/^farmhand_build_info\{version="[^"]+",nodejs="[^"]+"\} 1$/m);
  });

  it('reads the node state at scrape time: a reservation makes it reserved and not available', async () => {
    const alice = await asUser(d, 'alice');
    const r = await alice.post('/api/v2/reservations').send({ node_ids: [d.config.node_id], message: 'metrics test' });
    expect(r.status, r.text).to.equal(200);
    const reservationId = (r.body as { reservations: Array<{ reservation_id: string }> }).reservations[0]!.reservation_id;
    try {
      const text = (await d.http.get('/metrics')).text;
      expect(sample(text, 'farmhand_node_reserved')).to.equal(1);
      expect(sample(text, 'farmhand_node_available')).to.equal(0);
      expect(sample(text, 'farmhand_node_online')).to.equal(1);
    } finally {
      expect((await alice.delete(`/api/v2/reservations/${reservationId}`)).status).to.be.within(200, 204);
    }
    const text = (await d.http.get('/metrics')).text;
    expect(sample(text, 'farmhand_node_reserved')).to.equal(0);
    expect(sample(text, 'farmhand_node_available')).to.equal(1);
  });

  it('counts HTTP requests by route pattern and status, never by raw path or id', () => {
    expect(sample(afterJobs, 'farmhand_http_requests_total{method="POST",route="/api/v1/run_tests",status="200"}')).to.equal(1);
    expect(sample(afterJobs, 'farmhand_http_requests_total{method="GET",route="/api/v1/jobs/:node/:hex/:num",status="200"}')).to.be.greaterThan(0);
    // No label value holds a job uid's hex part or a result's time stamp.
    const labels = [...afterJobs.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]).join('\n');
    expect(labels).to.not.match(/[0-9a-f]{16}|\d{4}-\d\d-\d\d_/);
  });

  it('/healthz answers 200 with the version; /readyz lists every check and is 200 when all pass', async () => {
    const health = await d.http.get('/healthz');
    expect(health.status).to.equal(200);
    expect(health.body).to.include({ status: 'ok', starting: false });
    const ready = await d.http.get('/readyz');
    expect(ready.status, ready.text).to.equal(200);
    expect(ready.body.ready).to.equal(true);
    expect(Object.keys(ready.body.checks)).to.have.members(['capture', 'test_pack', 'data_dir', 'disk']);
    for (const c of Object.values(ready.body.checks as Record<string, { ok: boolean }>)) expect(c.ok).to.equal(true);
  });

  it('/metrics follows auth.v1_requires_token; /healthz and /readyz never need a token', () => {
    expect(needsToken('/metrics', { v1RequiresToken: false })).to.equal(false);
    expect(needsToken('/metrics', { v1RequiresToken: true })).to.equal(true);
    expect(needsToken('/healthz', { v1RequiresToken: true })).to.equal(false);
    expect(needsToken('/readyz', { v1RequiresToken: true })).to.equal(false);
  });

  it('the sample alert rules and scrape config of docs/operations.md pass promtool check rules and check config', async () => {
    const doc = await readFile(path.join(ROOT, 'docs/operations.md'), 'utf8');
    const block = (first: string) => new RegExp('```yaml\\n(# ' + first.replace('.', '\\.') + '\\n[\\s\\S]*?)```').exec(doc)?.[1];
    const rules = block('farmhand-alerts.yml');
    const config = block('prometheus.yml');
    expect(rules, 'a yaml block starting "# farmhand-alerts.yml" in docs/operations.md').to.be.a('string');
    expect(config, 'a yaml block starting "# prometheus.yml" in docs/operations.md').to.be.a('string');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-rules-'));
    try {
      await writeFile(path.join(dir, 'farmhand-alerts.yml'), rules!);
      await writeFile(path.join(dir, 'prometheus.yml'), config!);
      const checkRules = await promtool(['check', 'rules', path.join(dir, 'farmhand-alerts.yml')]);
      expect(checkRules.code, checkRules.out).to.equal(0);
      expect(checkRules.out).to.match(/SUCCESS: 2 rules found/);
      const checkConfig = await promtool(['check', 'config', path.join(dir, 'prometheus.yml')]);
      expect(checkConfig.code, checkConfig.out).to.equal(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
