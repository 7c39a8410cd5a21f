// NodeService: the spec's Node (v2) object - every field with its type, each
// not-available reason, the node config read from a real git test pack, and last use.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { availabilityText } from '../../src/core/availability.js';
import type { JobRecord } from '../../src/core/model.js';
import { presentNode } from '../../src/http/presenters.js';
import { nodeState } from '../../src/farm/hub/availability.js';
import { localIpAddress, NodeService, type NodeServiceOptions, type NodeUsage, type NodeUsageStore } from '../../src/core/node.js';
import type { CaptureHealth, TestPack } from '../../src/core/ports.js';
import { ReservationService, type ReservationState } from '../../src/core/reservations.js';
import { GitTestPack } from '../../src/runner/gitTestPack.js';
import { parseIniConfig } from '../../src/runner/iniConfig.js';
import { StateNodeUsageStore, StateStore } from '../../src/storage/state.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { FakeClock } from '../fixtures/fakeClock.js';
import { jobRecord } from '../fixtures/records.js';

const NODE = 'farmhand-0123456789ab';
const BASE = 'http://node.example:8080';
const T0 = Date.parse('2030-06-15T12:00:00.000Z');

const job = (over: Partial<JobRecord> = {}): JobRecord => jobRecord({ job_uid: `/${NODE}/beef/7`, ...over });

class MemoryUsage implements NodeUsageStore {
  saves: NodeUsage[] = [];
  load = () => this.saves.at(-1) ?? null;
  save = async (u: NodeUsage) => void this.saves.push({ ...u });
}

/** A test pack whose main branch has no node config: no git needed. */
const emptyPack: Pick<TestPack, 'resolve' | 'readFile'> = { resolve: async () => ({ sha: 'c'.repeat(40), branch: 'main' }), readFile: async () => undefined };

function setup(over: Partial<NodeServiceOptions> = {}) {
  const clock = new FakeClock(T0);
  const world = {
    health: { online: true, reason: null } as CaptureHealth,
    current: undefined as JobRecord | undefined,
    running: false,
    latest: undefined as string | undefined,
    unhealthy: null as string | null,
  };
  let state: ReservationState = { last_reservation_id: 0, reservations: [] };
  const reservations = new ReservationService({
    store: { load: () => state, save: async (s) => void (state = s) },
    clock,
    knownNodes: () => [NODE],
    isBusy: () => world.running,
  });
  const usage = new MemoryUsage();
  const node = new NodeService({
    nodeId: NODE,
    settings: { licence_expiry: '2030-06-15', external_ip_address: null, geoip_city: null, geoip_country: null },
    health: () => world.health,
    jobs: { current: () => world.current, isRunning: () => world.running },
    latestResultId: () => world.latest,
    testPack: emptyPack,
    parseIni: parseIniConfig,
    networkInterfaces: () => ({ lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }], eth0: [{ address: '192.168.1.20', family: 'IPv4', internal: false }] }),
    reservations,
    usage,
    healthProblem: () => world.unhealthy,
    clock,
    ...over,
  });
  return { clock, world, reservations, usage, node };
}

/** The spec's Node object as `caller` sees it: the service's state through the v2 presenter. */
const status = async (node: NodeService, caller: string | undefined, base: string) => presentNode(await node.state(), caller, base);

const SPEC_FIELDS = [
  'node_id', 'node_url', 'available', 'not_available_reason', 'online', 'config', 'device_type', 'friendly_name',
  'external_ip_address', 'local_ip_address', 'geoip_city', 'geoip_country', 'job', 'last_used_by', 'last_used_time',
  'licence_expiry', 'reservation',
];

describe('node status: fields', () => {
  it('has every field of the spec\'s Node object, with the right type, on a fresh node', async () => {
    const { node } = setup();
    const s = await status(node, 'alice', BASE);
    expect(Object.keys(s)).to.have.members(SPEC_FIELDS);
    expect(s).to.deep.equal({
      node_id: NODE,
      node_url: `${BASE}/api/v2/nodes/${NODE}`,
      available: true,
      not_available_reason: null,
      online: true,
      config: {},
      device_type: null,
      friendly_name: null,
      external_ip_address: null,
      local_ip_address: '192.168.1.20',
      geoip_city: null,
      geoip_country: null,
      job: null,
      last_used_by: null,
      last_used_time: null,
      licence_expiry: '2030-06-15',
      reservation: null,
    });
  });

  it('every field has the spec\'s type on a used, reserved, busy node', async () => {
    const { node, world, reservations } = setup();
    await reservations.reserve('alice', { node_ids: [NODE], message: 'm', duration_secs: 60 });
    world.current = job({ status: 'running', end_time: null });
    world.running = true;
    world.latest = `/${NODE}/beef/7/2030-06-15_11.04.00`;
    node.recordUse('alice');
    const s = await status(node, 'alice', BASE);
    const types: Record<string, string> = {
      node_id: 'string', node_url: 'string', available: 'boolean', not_available_reason: 'string', online: 'boolean',
      config: 'object', device_type: 'null', friendly_name: 'null', external_ip_address: 'null', local_ip_address: 'string',
      geoip_city: 'null', geoip_country: 'null', job: 'object', last_used_by: 'string', last_used_time: 'string',
      licence_expiry: 'string', reservation: 'object',
    };
    for (const [k, t] of Object.entries(types)) {
      const v = (s as unknown as Record<string, unknown>)[k];
      expect(v === null ? 'null' : typeof v, k).to.equal(t);
    }
    expect(Number.isNaN(Date.parse(s.last_used_time!))).to.equal(false);
    expect(Object.keys(s.reservation!)).to.have.members([
      'reservation_id', 'node_id', 'username', 'start_time', 'expires', 'message', 'message_html', 'reserved_by_you',
    ]);
    expect(s.job).to.include.keys('job_uid', 'job_url', 'status', 'log_url', 'triage_url');
  });

  it('takes external address and geo-IP from the config', async () => {
    const settings = { licence_expiry: '2099-12-31', external_ip_address: '203.0.113.7', geoip_city: 'Oslo', geoip_country: 'NO' };
    const s = await status(setup({ settings }).node, undefined, BASE);
    expect(s).to.include({ external_ip_address: '203.0.113.7', geoip_city: 'Oslo', geoip_country: 'NO', licence_expiry: '2099-12-31' });
  });

  it('job: the current or last job as a Job object plus log_url and triage_url of its latest result', async () => {
    const { node, world } = setup();
    world.current = job();
    world.latest = `/${NODE}/beef/7/2030-06-15_11.04.00`;
    const s = await status(node, 'alice', BASE);
    expect(s.job).to.deep.equal({
      job_uid: `/${NODE}/beef/7`,
      job_url: `${BASE}/api/v2/jobs/${NODE}/beef/7`,
      status: 'exited',
      start_time: '2030-06-15T11:00:00.000Z',
      end_time: '2030-06-15T11:05:00.000Z',
      result_counts: { pass: 1, fail: 0, error: 0, total: 1 },
      log_url: `${BASE}/api/v2/results/${NODE}/beef/7/2030-06-15_11.04.00/farmhand.log`,
      triage_url: `${BASE}/app/results/${NODE}/beef/7/2030-06-15_11.04.00`,
    });
  });

  it('job: before its first run starts (or stopped before it had one), log_url and triage_url are the job\'s own log and page (spec: strings)', async () => {
    const { node, world } = setup();
    world.current = job({ status: 'running', end_time: null, result_counts: { pass: 0, fail: 0, error: 0, total: 0 } });
    world.running = true;
    world.latest = undefined; // the test pack is being checked out: no run yet
    expect((await status(node, 'alice', BASE)).job).to.include({
      log_url: `${BASE}/api/v2/jobs/${NODE}/beef/7/log`,
      triage_url: `${BASE}/app/jobs/${NODE}/beef/7`,
    });
    world.current = job({ result_counts: { pass: 0, fail: 0, error: 0, total: 0 } });
    world.running = false;
    expect((await status(node, 'alice', BASE)).job).to.include({
      log_url: `${BASE}/api/v2/jobs/${NODE}/beef/7/log`,
      triage_url: `${BASE}/app/jobs/${NODE}/beef/7`,
    });
  });

  it('job: while the first run of a job is in progress, log_url and triage_url name that run (spec: strings)', async () => {
    const { node, world } = setup();
    const run = `/${NODE}/beef/8/2030-06-15_11.59.00`;
    world.current = job({ job_uid: `/${NODE}/beef/8`, number: 8, status: 'running', end_time: null, current_run: { result_id: run, test_case: 'tests/a.py::test_a', start_time: '2030-06-15T11:59:00.000Z', pid: 1234 } });
    world.running = true;
    world.latest = undefined; // nothing of this job is recorded yet
    expect((await status(node, 'alice', BASE)).job).to.include({
      log_url: `${BASE}/api/v2/results${run}/farmhand.log`,
      triage_url: `${BASE}/app/results${run}`,
    });
    // A later run in progress wins over the job's latest recorded result.
    world.latest = `/${NODE}/beef/8/2030-06-15_11.58.00`;
    expect((await status(node, 'alice', BASE)).job?.triage_url).to.equal(`${BASE}/app/results${run}`);
  });

  it('reservation: the active one as the caller sees it, else null', async () => {
    const { node, reservations } = setup();
    await reservations.reserve('alice', { node_ids: [NODE], message: '**hands off**' });
    const mine = (await status(node, 'alice', BASE)).reservation;
    expect(mine).to.include({ reservation_id: 1, username: 'alice', reserved_by_you: true, message_html: '<p><strong>hands off</strong></p>\n' });
    expect((await status(node, 'bob', BASE)).reservation?.reserved_by_you).to.equal(false);
    await reservations.end('alice', 1);
    expect((await status(node, 'alice', BASE)).reservation).to.equal(null);
  });

  it('stateOf: 404 for any other node id', async () => {
    const { node } = setup();
    expect((await node.stateOf(NODE)).node_id).to.equal(NODE);
    try {
      await node.stateOf('other-node');
      expect.fail('no error');
    } catch (e) {
      expect(e).to.have.property('code', 'not_found');
    }
  });
});

describe('node status: not available, and why', () => {
  it('offline: the capture has no picture', async () => {
    const { node, world } = setup();
    world.health = { online: false, reason: 'ffmpeg exited: /dev/video0 not found' };
    const s = await status(node, 'alice', BASE);
    expect(s).to.include({ available: false, online: false, not_available_reason: 'offline: ffmpeg exited: /dev/video0 not found' });
  });

  it('recording stopped on a full disk: still online and available, with video_problem "no video: disk full"', async () => {
    const { node, world } = setup();
    world.health = { online: true, reason: null, video: 'no video: disk full' };
    const s = await status(node, 'alice', BASE);
    expect(s).to.include({ available: true, online: true, video_problem: 'no video: disk full' });
    world.health = { online: true, reason: null };
    expect(await status(node, 'alice', BASE)).not.to.have.property('video_problem');
  });

  it('reserved - "even by the caller"', async () => {
    const { node, reservations } = setup();
    await reservations.reserve('alice', { node_ids: [NODE], message: 'm' });
    for (const caller of ['alice', 'bob']) {
      expect(await status(node, caller, BASE)).to.include({ available: false, online: true, not_available_reason: 'reserved by alice (reservation 1)' });
    }
  });

  it('running a test job', async () => {
    const { node, world } = setup();
    world.running = true;
    world.current = job({ status: 'running', end_time: null });
    expect(await status(node, 'alice', BASE)).to.include({ available: false, not_available_reason: `running a test job (/${NODE}/beef/7)` });
  });

  it('licence expired: valid through its expiry day (UTC), expired the day after', async () => {
    const { node, clock } = setup();
    clock.t = Date.parse('2030-06-15T23:59:59.999Z');
    expect(node.licenceExpired()).to.equal(false);
    expect((await status(node, 'alice', BASE)).available).to.equal(true);
    clock.t += 1;
    expect(node.licenceExpired()).to.equal(true);
    expect(await status(node, 'alice', BASE)).to.include({ available: false, not_available_reason: 'licence expired on 2030-06-15' });
  });

  it('one reason at a time, in order: offline, licence, health check failed, reserved, running', async () => {
    const { node, world, reservations, clock } = setup();
    world.current = job({ status: 'running', end_time: null });
    world.running = true;
    const reason = async () => (await status(node, 'alice', BASE)).not_available_reason;
    expect(await reason()).to.match(/^running a test job/);
    world.running = false;
    await reservations.reserve('alice', { node_ids: [NODE], message: 'm' });
    world.running = true;
    expect(await reason()).to.match(/^reserved by alice/);
    world.unhealthy = 'health check failed: InfrastructureError: ir_transport: IR Toy was disconnected';
    expect(await status(node, 'alice', BASE)).to.include({ available: false, not_available_reason: world.unhealthy });
    clock.t = Date.parse('2030-06-16T00:00:00Z');
    expect(await reason()).to.match(/^licence expired/);
    world.health = { online: false, reason: null };
    expect(await reason()).to.equal('offline: no picture from the device under test');
  });
});

describe('node status: availability as a kind and a detail', () => {
  it('each reason has its kind; not_available_reason is rendered from it, and the v2 object does not carry it', async () => {
    const { node, world, reservations, clock } = setup();
    const seen = async () => {
      const state = await node.state();
      expect(state.not_available_reason).to.equal(availabilityText(state.availability));
      expect(presentNode(state, 'alice', BASE)).not.to.have.property('availability');
      return state.availability;
    };
    expect(await seen()).to.deep.equal({ kind: 'available', detail: null });
    world.current = job({ status: 'running', end_time: null });
    world.running = true;
    expect(await seen()).to.deep.equal({ kind: 'running', detail: `/${NODE}/beef/7` });
    world.running = false;
    await reservations.reserve('alice', { node_ids: [NODE], message: 'm' });
    expect(await seen()).to.deep.equal({ kind: 'reserved', detail: 'alice (reservation 1)' });
    // A health check's reason says what it likes; its kind is still unhealthy.
    world.unhealthy = 'reserved by facilities: rewiring the bench';
    expect(await seen()).to.deep.equal({ kind: 'unhealthy', detail: 'reserved by facilities: rewiring the bench' });
    clock.t = Date.parse('2030-06-16T00:00:00Z');
    expect(await seen()).to.deep.equal({ kind: 'licence_expired', detail: '2030-06-15' });
    world.health = { online: false, reason: 'ffmpeg exited' };
    expect(await seen()).to.deep.equal({ kind: 'offline', detail: 'ffmpeg exited' });
  });

  it("the portal reads a node.state's availability by its kind only: a known one as is, anything else unhealthy (never from the text)", () => {
    const node = { not_available_reason: 'reserved by alice (reservation 1)' };
    expect(nodeState({ node, availability: { kind: 'reserved', detail: 'alice (reservation 1)' } })!.availability).to.deep.equal({ kind: 'reserved', detail: 'alice (reservation 1)' });
    for (const availability of [undefined, null, { kind: 'on fire', detail: null }, { kind: 'available', detail: 'x' }, 'reserved by alice']) {
      expect(nodeState({ node, availability })!.availability.kind, JSON.stringify(availability)).to.equal('unhealthy');
    }
    expect(nodeState({ availability: { kind: 'available', detail: null } })).to.equal(undefined);
    expect(nodeState(null)).to.equal(undefined);
  });
});

describe('node status: last use', () => {
  it('recordUse shows at once; writes at most once a second, the latest use winning', async () => {
    const { node, usage, clock } = setup();
    node.recordUse('alice');
    expect(usage.saves).to.deep.equal([{ user: 'alice', time: new Date(T0).toISOString() }]);
    clock.t += 200;
    node.recordUse('bob');
    clock.t += 200;
    node.recordUse('alice');
    node.recordUse('carol');
    const s = await status(node, undefined, BASE);
    expect(s).to.include({ last_used_by: 'carol', last_used_time: new Date(T0 + 400).toISOString() });
    expect(usage.saves, 'throttled').to.have.length(1);
    clock.advance(599);
    expect(usage.saves).to.have.length(1);
    clock.advance(1);
    expect(usage.saves).to.have.length(2);
    expect(usage.saves[1]).to.deep.equal({ user: 'carol', time: new Date(T0 + 400).toISOString() });
  });

  it('flush writes a pending use; a new service reads it back from the state file', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-node-'));
    try {
      const store = new StateNodeUsageStore(await StateStore.open(dir));
      const { node, clock } = setup({ usage: store });
      node.recordUse('alice');
      clock.t += 10;
      node.recordUse('bob');
      await node.flush();
      const again = setup({ usage: new StateNodeUsageStore(await StateStore.open(dir)) }).node;
      expect(await status(again, undefined, BASE)).to.include({ last_used_by: 'bob', last_used_time: new Date(T0 + 10).toISOString() });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('node status: local_ip_address', () => {
  it('first non-internal IPv4, else IPv6 (global first), else null', () => {
    const lo = { address: '127.0.0.1', family: 'IPv4', internal: true };
    const v6ll = { address: 'fe80::1', family: 'IPv6', internal: false, scopeid: 2 };
    const v6 = { address: '2001:db8::5', family: 'IPv6', internal: false, scopeid: 0 };
    expect(localIpAddress({ lo: [lo], wlan0: [v6ll, v6, { address: '10.0.0.9', family: 4, internal: false }] })).to.equal('10.0.0.9');
    expect(localIpAddress({ lo: [lo], eth0: [v6ll, v6] })).to.equal('2001:db8::5');
    expect(localIpAddress({ eth0: [v6ll] })).to.equal('fe80::1');
    expect(localIpAddress({ lo: [lo], eth1: undefined })).to.equal(null);
  });
});

describe('node status: config from the test pack (real git)', () => {
  let repo: TestPackRepo;
  let dir: string;
  let pack: GitTestPack;
  before(async () => {
    repo = await makeTestPack({
      'tests/a.py': 'def test_a():\n    pass\n',
      [`config/test-farm/${NODE}.conf`]: '[node]\nfriendly_name = Living-room box\n\n[device_under_test]\ndevice_type = roku-ultra\nip_address = 192.168.1.50\n',
      'config/test-farm/other-node.conf': '[node]\nfriendly_name = Not me\n',
    });
    dir = await mkdtemp(path.join(tmpdir(), 'farmhand-node-pack-'));
    pack = new GitTestPack({ url: repo.dir, dir: path.join(dir, 'test-pack.git'), worktreesDir: path.join(dir, 'checkouts'), refreshAfterSecs: 0 });
    await pack.open();
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
    await repo.cleanup();
  });

  /** The real test pack, counting reads of the node's file. */
  const counting = () => {
    const c = { reads: 0 };
    const tp: Pick<TestPack, 'resolve' | 'readFile'> = {
      resolve: (r) => pack.resolve(r),
      readFile: (sha, p) => (c.reads++, pack.readFile(sha, p)),
    };
    return { c, tp };
  };

  it('reads config/test-farm/<node_id>.conf on main as nested objects; friendly_name and device_type come from it', async () => {
    const { node } = setup({ testPack: pack });
    const s = await status(node, 'alice', BASE);
    expect(s.config).to.deep.equal({
      node: { friendly_name: 'Living-room box' },
      device_under_test: { device_type: 'roku-ultra', ip_address: '192.168.1.50' },
    });
    expect(s).to.include({ friendly_name: 'Living-room box', device_type: 'roku-ultra' });
  });

  it('reads the file once per main-branch SHA, and again after a push to main is fetched', async () => {
    const { c, tp } = counting();
    const { node } = setup({ testPack: tp });
    await status(node, 'alice', BASE);
    await status(node, 'bob', BASE);
    expect(c.reads).to.equal(1);
    await repo.commit({ [`config/test-farm/${NODE}.conf`]: '[node]\nfriendly_name = Bedroom box\n' });
    // The status never fetches (nothing slow on a request's path): the push is seen once the mirror
    // is fetched, as the post-receive hook or the poll timer does.
    await pack.fetch();
    const s = await status(node, 'alice', BASE);
    expect(c.reads).to.equal(2);
    expect(s).to.include({ friendly_name: 'Bedroom box', device_type: null });
    expect(s.config).to.deep.equal({ node: { friendly_name: 'Bedroom box' } });
  });

  it('{} and nulls when the node has no config file', async () => {
    const { node } = setup({ testPack: pack, nodeId: 'farmhand-ffffffffffff' });
    expect(await status(node, 'alice', BASE)).to.include({ friendly_name: null, device_type: null }).and.have.deep.property('config', {});
  });

  it('a test pack that does not answer holds the status at most configWaitMs, then the last config read is used', async () => {
    let hang = false;
    const tp: Pick<TestPack, 'resolve' | 'readFile'> = {
      resolve: (r) => (hang ? new Promise(() => {}) : pack.resolve(r)),
      readFile: (sha, p) => pack.readFile(sha, p),
    };
    const { node } = setup({ testPack: tp, clock: undefined, configWaitMs: 50 });
    // Under load the first read may itself outlast 50 ms; it completes in the background all the same.
    let first = await status(node, 'alice', BASE);
    for (let i = 0; i < 100 && first.friendly_name === null; i++) first = await status(node, 'alice', BASE);
    expect(first.friendly_name).to.not.equal(null);
    hang = true;
    // The wait is tested by its outcome: the test pack never answers, so only configWaitMs can end it
    // (mocha fails the test if it hangs).
    const s = await status(node, 'alice', BASE);
    expect(s.friendly_name).to.not.equal(null);
  });
});
