// hubJobStarter (src/farm/queue/adapters.ts): what a node's answer to the forwarded run_tests becomes for the queue:
// a job_uid, a retry (busy, rate limited, unavailable, not connected), a start not known to have happened or not (a 5xx
// on the way, no answer, the connection lost: asked again with the same key), or a refusal that fails the job.
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { FarmError } from '../../src/core/errors.js';
import type { ForwardRequest, ForwardResponse } from '../../src/farm/contract.js';
import type pg from 'pg';
import type { FarmEvent } from '../../src/core/events.js';
import { farmNodeStates, hubJobStarter } from '../../src/farm/queue/adapters.js';
import { PoolHealthChecks } from '../../src/farm/queue/health.js';
import type { StartOutcome } from '../../src/farm/queue/ports.js';

const RUN = { test_pack_revision: 'main', test_cases: ['tests/a.py::test_a'], category: 'default', soak: 'run once' as const, shuffle: false, remote_control: null, tags: { b: '1' } };

async function outcome(answer: (req: ForwardRequest) => ForwardResponse | Promise<ForwardResponse>, online = true): Promise<{ out: StartOutcome; sent: ForwardRequest[] }> {
  const sent: ForwardRequest[] = [];
  const starter = hubJobStarter({
    hub: {
      link: () => ({ online }) as ReturnType<Parameters<typeof hubJobStarter>[0]['hub']['link']>,
      forward: async (nodeId, req) => {
        sent.push({ ...req, path: `${nodeId} ${req.path}` });
        return answer(req);
      },
    },
    baseUrl: 'http://portal:8080',
  });
  const out = await starter.start({ nodeId: 'n1', run: RUN, username: 'alice', queueId: 7, key: 'k-7' }, new AbortController().signal);
  return { out, sent };
}

const reply = (status: number, body: unknown): ForwardResponse => ({ status, headers: { 'content-type': 'application/json' }, body: Readable.from([Buffer.from(JSON.stringify(body))]) });

describe('queue: hubJobStarter', () => {
  it('forwards run_tests with the node id, on behalf of the queuing user, and takes the job_uid of a 200', async () => {
    const { out, sent } = await outcome(() => reply(200, { job_uid: '/n1/abcd/3', status: 'running' }));
    expect(out).to.deep.equal({ ok: true, job_uid: '/n1/abcd/3' });
    expect(sent).to.have.length(1);
    expect(sent[0]).to.include({ method: 'POST', path: 'n1 /api/v2/run_tests', user: 'alice', baseUrl: 'http://portal:8080' });
    expect(sent[0]!.headers).to.include({ 'idempotency-key': 'k-7' });
    expect(JSON.parse(sent[0]!.body!.toString('utf8'))).to.deep.equal({ ...RUN, node_id: 'n1' });
  });

  it('a busy, limited or unavailable node is a retry; another 4xx fails the job with the node\'s message', async () => {
    for (const status of [409, 429, 503]) {
      const { out } = await outcome(() => reply(status, { error: 'x', message: `said ${status}` }));
      expect(out, String(status)).to.deep.equal({ ok: false, retry: true, status, message: `said ${status}` });
    }
    const bad = await outcome(() => reply(400, { error: 'invalid_request', message: 'no such test case' }));
    expect(bad.out).to.deep.equal({ ok: false, retry: false, status: 400, message: 'no such test case' });
  });

  it('a node not connected here is a retry with nothing sent', async () => {
    const { out, sent } = await outcome(() => reply(200, { job_uid: '/n1/abcd/3' }), false);
    expect(out).to.deep.equal({ ok: false, retry: true, status: null, message: 'node n1 is not connected to this portal' });
    expect(sent).to.deep.equal([]);
  });

  it('a 5xx on the way, a 200 without a job, or the connection lost: not known whether it started (unknown)', async () => {
    for (const status of [500, 502, 504]) {
      const { out } = await outcome(() => reply(status, { error: 'x', message: `said ${status}` }));
      expect(out, String(status)).to.deep.equal({ ok: false, retry: true, unknown: true, status, message: `said ${status}` });
    }
    const lost = await outcome(() => Promise.reject(new FarmError('device_unavailable', 'node n1 could not answer: the stream closed before an answer')));
    expect(lost.out).to.deep.equal({ ok: false, retry: true, unknown: true, status: null, message: 'node n1 could not answer: the stream closed before an answer' });
    const odd = await outcome(() => ({ status: 200, headers: {}, body: Readable.from([Buffer.from('not json')]) }));
    expect(odd.out).to.include({ ok: false, retry: true, unknown: true, status: 200 });
  });
});

describe('queue: farmNodeStates wake-ups', () => {
  it("a change of a node's own availability (its node.state, not a hub event) wakes the dispatcher, as job.exited does", () => {
    const availabilityListeners: Array<(nodeId: string) => void> = [];
    const eventListeners: Array<(e: FarmEvent) => void> = [];
    const states = farmNodeStates({
      pool: {} as pg.Pool,
      hub: {
        link: () => undefined,
        onEvent: (fn) => (eventListeners.push(fn), () => eventListeners.splice(eventListeners.indexOf(fn), 1)),
        onAvailabilityChange: (fn) => (availabilityListeners.push(fn), () => availabilityListeners.splice(availabilityListeners.indexOf(fn), 1)),
      },
    });
    let wakes = 0;
    const off = states.onChange!(() => wakes++);
    availabilityListeners.forEach((fn) => fn('n1'));
    expect(wakes).to.equal(1);
    eventListeners.forEach((fn) => fn({ id: '1', type: 'job.exited', time: '', data: { node_id: 'n1' } } as unknown as FarmEvent));
    expect(wakes).to.equal(2);
    eventListeners.forEach((fn) => fn({ id: '2', type: 'run.finished', time: '', data: { node_id: 'n1' } } as unknown as FarmEvent));
    expect(wakes).to.equal(2);
    off();
    expect(availabilityListeners).to.have.length(0);
    expect(eventListeners).to.have.length(0);
  });

  it("jobOf is the node's job as this portal's hub last heard of it (running or ended), null when none or not connected here", () => {
    const links: Record<string, { job: { job_uid: string; status: 'running' | 'exited' } | null }> = {
      n1: { job: { job_uid: '/n1/ab/3', status: 'exited' } },
      n2: { job: null },
    };
    const states = farmNodeStates({
      pool: {} as pg.Pool,
      hub: { link: ((id: string) => links[id]) as never, onEvent: () => () => undefined },
    });
    expect(states.jobOf!('n1')).to.deep.equal({ job_uid: '/n1/ab/3', status: 'exited' });
    expect(states.jobOf!('n2')).to.equal(null);
    expect(states.jobOf!('n3')).to.equal(null);
  });
});

describe('queue: farmNodeStates with pool health checks', () => {
  it("a check's verdict committed while availability is read never leaves a failed node free: its hold is read before the verdicts", async () => {
    // The check's end as the health checks make it: the verdict committed, then a pass lets the hold go. Here it lands
    // just after the read of node_health began (that read sees the table before it).
    let committed = false;
    const pool = {
      query: async (sql: string) => {
        if (/FROM node_health\b/.test(sql)) {
          const rows = committed ? [{ node_id: 'n1', state: 'unhealthy', check_id: 1, selector: 'device=a', test_case: 't', result_id: 'r', reason: 'fail', since: new Date(0), set_by: 'x' }] : [];
          committed = true;
          return { rows };
        }
        return { rows: [{ node_id: 'n1', online: true, offline_reason: null }] };
      },
    } as unknown as pg.Pool;
    const states = farmNodeStates({
      pool,
      hub: { link: (() => ({ nodeId: 'n1', online: true, job: null, availability: { kind: 'available', detail: null } })) as never, onEvent: () => () => undefined },
      health: { held: () => (committed ? undefined : 'health check t of pool device=a running'), onChange: () => () => undefined },
    });
    const first = (await states.availability()).get('n1');
    expect(first?.kind, JSON.stringify(first)).to.equal('running');
    const next = (await states.availability()).get('n1');
    expect(next?.kind, JSON.stringify(next)).to.equal('unhealthy');
  });
});

describe('queue: pool health checks, a node already connected when they start', () => {
  it('is held until a pass has looked whether its check is due, so a dispatcher reading at once never finds it free', async () => {
    // No pool has a check here: the first pass lets the hold go. Until it has, a dispatcher's pass (the portal starting
    // with nodes connected, jobs queued) must not give the node a job its check would have to wait behind.
    const pool = { query: async () => ({ rows: [], rowCount: 0 }) } as unknown as pg.Pool;
    const changes: string[] = [];
    const health = new PoolHealthChecks({
      pool,
      hub: { link: () => undefined, links: () => [{ nodeId: 'n1', online: true }, { nodeId: 'n2', online: false }], onEvent: () => () => undefined, folded: async () => undefined } as never,
      starter: { start: async () => ({ ok: false, retry: true, status: null, message: 'not here' }) },
      base: { availability: async () => new Map() },
    });
    health.onChange(() => changes.push(String(health.held('n1'))));
    health.start();
    expect(health.held('n1')).to.equal('health check: looking whether one is due');
    expect(health.held('n2')).to.equal(undefined);
    await health.close();
    expect(health.passes).to.be.greaterThan(0);
    expect(health.held('n1')).to.equal(undefined);
    // The hold's end is told (the dispatcher is woken by it).
    expect(changes).to.deep.equal(['undefined']);
  });
});
