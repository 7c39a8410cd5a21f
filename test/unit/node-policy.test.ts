// NodePolicy: the one place that decides node use for v1 and v2 - the order of
// the run_tests checks, last use, interruption notices and the remote rule.
import { expect } from 'chai';
import type { JobRecord } from '../../src/core/model.js';
import { NodePolicy, type Caller, type NodePolicyDeps } from '../../src/core/nodePolicy.js';
import type { CaptureHealth, IniConfig } from '../../src/core/ports.js';
import { ReservationService, type ReservationState } from '../../src/core/reservations.js';
import type { RunRequest } from '../../src/core/runRequest.js';
import { FakeClock } from '../fixtures/fakeClock.js';
import { rejectionCode } from '../helpers/rejections.js';

const NODE = 'farmhand-test';
const SHA = 'a'.repeat(40);
const REQ: RunRequest = { test_pack_revision: 'main', test_cases: ['tests/a.py::test_a'], category: 'default', soak: 'run once', shuffle: false, remote_control: null, tags: {} };
const v1: Caller = { user: undefined, api: 'v1' };
const alice: Caller = { user: 'alice', api: 'v2' };
const bob: Caller = { user: 'bob', api: 'v2' };

function setup() {
  const clock = new FakeClock(Date.parse('2030-06-15T12:00:00Z'));
  const world = {
    expired: false,
    running: false,
    health: { online: true, reason: null } as CaptureHealth,
    config: { test_pack: { default_remote_control: 'tv' } } as IniConfig,
    started: [] as { user: string; rule: string }[],
    uses: [] as string[],
    presses: [] as { key: string; remote: string }[],
    unhealthy: null as string | null,
  };
  let state: ReservationState = { last_reservation_id: 0, reservations: [] };
  const reservations = new ReservationService({ store: { load: () => state, save: async (s) => void (state = s) }, clock, knownNodes: () => [NODE], isBusy: () => world.running });
  const job = { job_uid: `/${NODE}/beef/1`, test_pack_sha: SHA } as JobRecord;
  const deps: NodePolicyDeps = {
    nodeId: NODE,
    jobs: {
      runTests: async (_req, user, rule) => (world.started.push({ user, rule: rule ?? 'v1' }), job),
      startedWithKey: () => undefined,
      stop: async () => ({ job, stopped: true }),
      current: () => job,
      isRunning: () => world.running,
    },
    reservations,
    node: {
      licenceExpired: () => world.expired,
      licenceExpiry: '2030-06-14',
      recordUse: (u: string) => void world.uses.push(u),
      stateOf: async () => { throw new Error('not used here'); },
    },
    health: () => world.health,
    healthProblem: () => world.unhealthy,
    testPack: { resolve: async () => ({ sha: SHA, branch: 'main' }), config: async () => world.config, remoteControls: async () => ['tv', 'zapper'] },
    keys: { press: async (key, o) => void world.presses.push({ key, remote: o.remote }) },
    frames: { screenshotPng: async () => Buffer.from('png'), thumbnailJpeg: async () => Buffer.from('jpg') },
  };
  return { world, reservations, policy: new NodePolicy(deps) };
}

describe('NodePolicy: run_tests, the same for v1 and v2', () => {
  it('an expired licence is 403 forbidden for v1 and v2 alike, and starts nothing', async () => {
    const { world, policy } = setup();
    world.expired = true;
    expect(await rejectionCode(policy.runTests(v1, REQ))).to.equal('forbidden');
    expect(await rejectionCode(policy.runTests(alice, REQ))).to.equal('forbidden');
    expect(world.started).to.deep.equal([]);
  });

  it('checks in the documented order: licence, reservation, busy, offline', async () => {
    const { world, policy, reservations } = setup();
    await reservations.reserve('bob', { node_ids: [NODE], message: 'mine' });
    world.running = true;
    world.health = { online: false, reason: 'no picture' };
    world.expired = true;
    expect(await rejectionCode(policy.runTests(alice, REQ))).to.equal('forbidden'); // licence
    world.expired = false;
    const e = await policy.runTests(alice, REQ).catch((x: Error) => x);
    expect((e as Error).message).to.match(/reserved by bob/); // then the reservation
    await reservations.end('bob', 1);
    expect(await rejectionCode(policy.runTests(alice, REQ))).to.equal('conflict'); // then busy
    world.running = false;
    expect(await rejectionCode(policy.runTests(alice, REQ))).to.equal('device_unavailable'); // then offline
    world.health = { online: true, reason: null };
    world.unhealthy = 'health check failed: InfrastructureError: ir_transport: x';
    const h = await policy.runTests(alice, REQ).catch((x: Error) => x);
    expect(h).to.include({ code: 'device_unavailable' }); // then the failed health check
    expect((h as Error).message).to.contain('health check failed: InfrastructureError: ir_transport: x');
    world.unhealthy = null;
    expect((await policy.runTests(alice, REQ)).value.job_uid).to.equal(`/${NODE}/beef/1`);
    expect(world.started).to.deep.equal([{ user: 'alice', rule: 'v2' }]);
  });

  it('an anonymous v1 caller runs as "anonymous" with the v1 remote rule', async () => {
    const { world, policy } = setup();
    await policy.runTests(v1, REQ);
    expect(world.started).to.deep.equal([{ user: 'anonymous', rule: 'v1' }]);
  });
});

describe('NodePolicy: last use and notices', () => {
  it('records a use for run, stop, press, pictures and reserve when the caller is known; never for an anonymous one', async () => {
    const { world, policy } = setup();
    await policy.runTests(alice, REQ);
    await policy.stop(alice, `/${NODE}/beef/1`);
    await policy.press(alice, 'KEY_OK', { revision: undefined, remote: null });
    await policy.picture(alice, 'screenshot');
    await policy.picture({ user: 'carol', api: 'v1' }, 'thumbnail');
    await policy.reserve(bob, { node_ids: [NODE], message: 'm' });
    expect(world.uses).to.deep.equal(['alice', 'alice', 'alice', 'alice', 'carol', 'bob']);
    const before = world.uses.length;
    await policy.picture(v1, 'screenshot');
    expect(world.uses).to.have.length(before);
  });

  it('v2 answers carry the owner\'s interruption notice once; a v1 answer leaves it pending', async () => {
    const { policy, reservations } = setup();
    await reservations.reserve('alice', { node_ids: [NODE], message: 'm' });
    await reservations.interrupt('bob', 1, 'need it');
    const viaV1 = await policy.runTests({ user: 'alice', api: 'v1' }, REQ);
    expect(viaV1.notices).to.deep.equal([]);
    const viaV2 = await policy.stop(alice, `/${NODE}/beef/1`);
    expect(viaV2.notices.map((n) => n.interrupted_by)).to.deep.equal(['bob']);
    expect((await policy.stop(alice, `/${NODE}/beef/1`)).notices).to.deep.equal([]);
  });
});

describe('NodePolicy: press', () => {
  it('uses the v2 remote rule: the default remote, else 400; another user\'s reservation is 403', async () => {
    const { world, policy, reservations } = setup();
    await policy.press(alice, 'KEY_OK', { revision: undefined, remote: null });
    await policy.press(alice, 'KEY_UP', { revision: 'main', remote: 'zapper' });
    expect(world.presses).to.deep.equal([{ key: 'KEY_OK', remote: 'tv' }, { key: 'KEY_UP', remote: 'zapper' }]);
    world.config = {};
    expect(await rejectionCode(policy.press(alice, 'KEY_OK', { revision: undefined, remote: null }))).to.equal('invalid_request');
    await reservations.reserve('bob', { node_ids: [NODE], message: 'm' });
    expect(await rejectionCode(policy.press(alice, 'KEY_OK', { revision: undefined, remote: 'tv' }))).to.equal('forbidden');
  });
});
