/**
 * Portals that can be many (docs/farm.md, "Many portals"): two real portals (startFarmPortal, replicas
 * "many") on one throwaway PostgreSQL cluster and one storage folder, with a real `farmhand serve` node.
 *
 * - A session made on portal A works on portal B; signed out on A, it is refused on B at once; a
 *   session survives its portal's restart; sessions are stored by hash only; prune deletes expired ones.
 * - A reservation request waiting on B is granted when its holder ends the reservation on A: B's
 *   periodic recheck is made an hour long here, so only the NOTIFY of A can wake it.
 * - One storage folder: while a chunk of a file is being written through A, B refuses to write that file
 *   (409, no offset: the node backs off), so the bytes never interleave; the file completed through B
 *   is whole, and A sees it.
 * - The farmhand channel's LISTEN connection comes back after it is cut.
 */
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import type { PortalConfigInput } from '../../src/farm/portal/config.js';
import { rawRequest } from '../helpers/rawRequest.js';
import { SseClient } from '../helpers/sse.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/processFarm.js';
import { waitFor } from '../helpers/wait.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';

const NODE = 'many-a';
const HOUR_MS = 3_600_000;

/** A person's session through the sign-in form: the cookie's value and the CSRF token the portal gave it. */
async function signIn(url: string, token: string): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${url}/app/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, next: '/' }).toString(),
  });
  expect(res.status, await res.text()).to.equal(303);
  const cookie = /farmhand_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
  expect(cookie, 'a session cookie').to.be.a('string');
  const who = await whoIs(url, cookie!);
  expect(who.login).to.be.a('string');
  return { cookie: cookie!, csrf: who.csrf! };
}

/** GET /app/session with the cookie: who the portal says is signed in (null: nobody). */
async function whoIs(url: string, cookie: string): Promise<{ login: string | null; csrf: string | null; role: string | null }> {
  const res = await fetch(`${url}/app/session`, { headers: { Cookie: `farmhand_session=${cookie}` } });
  expect(res.status).to.equal(200);
  return (await res.json()) as { login: string | null; csrf: string | null; role: string | null };
}

describe('farm: many portals on one database (sessions, wake-ups)', function () {
  this.timeout(240_000);
  let cluster: TestPostgres;
  let shared: string;
  let a: TestFarm;
  let b: TestFarm;
  let portArun: number;
  let portB: number;
  let many: Partial<PortalConfigInput>;
  let gate: string;

  // Each replica advertises where it listens: a request for a node connected to the other is passed on to it.
  const replica = (port: number): Partial<PortalConfigInput> => ({ ...many, listen: `127.0.0.1:${port}`, replicas: { ...many.replicas!, advertise_url: `http://127.0.0.1:${port}` } });
  const startA = () => startTestFarm({ cluster, portal: replica(portArun), options: { reservationRecheckMs: HOUR_MS } });

  before(async () => {
    cluster = await startPostgres();
    shared = await mkdtemp(path.join(os.tmpdir(), 'farmhand-many-'));
    const secret = path.join(shared, 'replica.secret');
    await writeFile(secret, 'a shared secret of the replicas, for tests only\n', { mode: 0o600 });
    portArun = await freePort();
    portB = await freePort();
    gate = path.join(shared, 'gate');
    many = {
      storage_dir: path.join(shared, 'storage'),
      replicas: { mode: 'many', advertise_url: 'http://127.0.0.1:1', secret_file: secret },
    };
    a = await startA();
    b = await startTestFarm({ cluster, portal: replica(portB), options: { reservationRecheckMs: HOUR_MS } });
    // A real node, connected to B; its one test waits for the gate file.
    const files = { ...STANDARD_FILES, 'tests/gate.py': ['import os, time', '', 'def test_gate():', `    while not os.path.exists(${JSON.stringify(gate)}):`, '        time.sleep(0.05)', ''].join('\n') };
    await b.addNode(NODE, { files });
  });

  after(async () => {
    await b?.stop();
    await a?.stop();
    await cluster?.stop();
    await rm(shared, { recursive: true, force: true });
  });

  /** A token that both portals accept (each hears of it by NOTIFY). */
  async function tokenOnBoth(user: string): Promise<string> {
    const token = await a.tokenFor(user);
    await waitFor(async () => (await fetch(`${b.url}/api/v2/user`, { headers: { Authorization: `token ${token}` } })).status === 200, {
      what: `portal B to accept ${user}'s token`,
      timeoutMs: 40_000,
    });
    return token;
  }

  it('a session made on A works on B; signed out on A, B refuses it at once and ends its event stream; the table holds only its hash', async () => {
    const token = await tokenOnBoth('alice');
    const s = await signIn(a.url, token);
    expect(await whoIs(b.url, s.cookie)).to.deep.equal({ login: 'alice', csrf: s.csrf, role: 'run' });
    // A state-changing request on B with A's session and its CSRF token is accepted as alice's.
    const made = await fetch(`${b.url}/api/v2/reservations`, {
      method: 'POST',
      headers: { Cookie: `farmhand_session=${s.cookie}`, 'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_ids: ['no-such-node'], message: 'x' }),
    });
    expect(made.status, 'the session is alice on B: the request reaches the reservations (404: no such node)').to.equal(404);

    const { rows } = await a.db.query<{ id_hash: Buffer; username: string; origin: string }>('SELECT id_hash, username, origin FROM web_sessions');
    expect(rows.map((r) => [r.username, r.origin])).to.deep.equal([['alice', 'token']]);
    expect(rows[0]!.id_hash.equals(createHash('sha256').update(s.cookie).digest()), 'the sha256 of the cookie is stored').to.equal(true);
    const text = JSON.stringify((await a.db.query('SELECT * FROM web_sessions')).rows);
    expect(text, 'neither the cookie nor the token is in the table').not.to.include(s.cookie).and.not.to.include(token);

    // An event stream held on B by the session: it ends when the session ends on A (the trigger's session_ended).
    const stream = await SseClient.open(`${b.url}/app/events`, { Cookie: `farmhand_session=${s.cookie}` });
    expect(stream.res.statusCode).to.equal(200);
    const out = await fetch(`${a.url}/app/sign-out`, { method: 'POST', redirect: 'manual', headers: { Cookie: `farmhand_session=${s.cookie}`, 'X-CSRF-Token': s.csrf } });
    expect(out.status).to.equal(303);
    await waitFor(() => stream.ended, { what: "B's event stream of the session to end, before any request on B", timeoutMs: 30_000 });
    expect(await whoIs(b.url, s.cookie), 'signed out on A: nobody on B').to.deep.equal({ login: null, csrf: null, role: null });
    expect((await a.db.query('SELECT 1 FROM web_sessions')).rowCount).to.equal(0);
  });

  it('a session survives a restart of its portal; a role change applies to it; a revoked token ends its sessions on every portal', async () => {
    const token = await tokenOnBoth('bob');
    const s = await signIn(a.url, token);
    await a.stop();
    a = await startA();
    expect(await whoIs(a.url, s.cookie), 'the same cookie after the restart').to.deep.equal({ login: 'bob', csrf: s.csrf, role: 'run' });
    // bob's role changed: his session on B has the new role at once (as his token does).
    const reserveAs = () =>
      fetch(`${b.url}/api/v2/reservations`, {
        method: 'POST',
        headers: { Cookie: `farmhand_session=${s.cookie}`, 'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json' },
        body: JSON.stringify({ node_ids: ['no-such-node'], message: 'x' }),
      });
    expect((await reserveAs()).status, 'role run: the request reaches the reservations').to.equal(404);
    await a.db.query("UPDATE users SET role = 'read' WHERE username = 'bob'");
    await waitFor(async () => (await reserveAs()).status === 403, { what: "bob's session on B to have the read role", timeoutMs: 40_000 });
    await a.db.query("UPDATE tokens SET revoked_at = now() WHERE username = 'bob'");
    await waitFor(async () => (await whoIs(b.url, s.cookie)).login === null, { what: 'B to end the session of the revoked token', timeoutMs: 40_000 });
    expect((await a.db.query("SELECT 1 FROM web_sessions WHERE username = 'bob'")).rowCount, 'the refused session is deleted').to.equal(0);
  });

  it('prune deletes expired and idle sessions, and an expired one is refused', async () => {
    const token = await tokenOnBoth('carol');
    const s1 = await signIn(a.url, token);
    const s2 = await signIn(a.url, token);
    await a.db.query("UPDATE web_sessions SET expires_at = now() - interval '1 second' WHERE id_hash = $1", [createHash('sha256').update(s1.cookie).digest()]);
    await a.db.query("UPDATE web_sessions SET last_used_at = now() - interval '13 hours' WHERE id_hash = $1", [createHash('sha256').update(s2.cookie).digest()]);
    expect((await whoIs(b.url, s1.cookie)).login, 'past its expiry').to.equal(null);
    expect(await a.portal.sessions.prune()).to.equal(1);
    expect((await a.db.query("SELECT 1 FROM web_sessions WHERE username = 'carol'")).rowCount).to.equal(0);
  });

  it('a reservation request waiting on B is granted when the holder ends the reservation on A (a NOTIFY, not a poll)', async () => {
    const holder = await tokenOnBoth('holder');
    const waiter = await tokenOnBoth('waiter');
    const reserve = (url: string, token: string, body: Record<string, unknown>) =>
      fetch(`${url}/api/v2/reservations`, { method: 'POST', headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const held = await reserve(b.url, holder, { node_ids: [NODE], message: 'holding' });
    expect(held.status, await held.clone().text()).to.equal(200);
    const id = ((await held.json()) as { reservations: { reservation_id: number }[] }).reservations[0]!.reservation_id;
    const waiting = reserve(b.url, waiter, { node_ids: [NODE], message: 'waiting', wait_secs: 90 });
    await waitFor(() => b.portal.reservations.waiting === 1, { what: 'the request to wait on B', timeoutMs: 30_000 });
    const ended = await fetch(`${a.url}/api/v2/reservations/${id}`, { method: 'DELETE', headers: { Authorization: `token ${holder}` } });
    expect(ended.status).to.be.oneOf([200, 204]);
    const granted = await waiting;
    expect(granted.status, await granted.clone().text()).to.equal(200);
    const body = (await granted.json()) as { reservations: { node_id: string; username: string }[] };
    expect(body.reservations.map((r) => [r.node_id, r.username])).to.deep.equal([[NODE, 'waiter']]);
    const [mine] = body.reservations as unknown as { reservation_id: number }[];
    expect((await fetch(`${a.url}/api/v2/reservations/${mine!.reservation_id}`, { method: 'DELETE', headers: { Authorization: `token ${waiter}` } })).ok).to.equal(true);
  });

  it("await_completion on A of a job of B's node: passed on to B, answered when the job exits; A hears of its result", async () => {
    const runner = await tokenOnBoth('runner');
    const started = await fetch(`${b.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${runner}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/gate.py::test_gate'], category: 'many' }),
    });
    expect(started.status, await started.clone().text()).to.equal(200);
    const uid = ((await started.json()) as { job_uid: string }).job_uid;
    await waitFor(async () => (await a.db.query("SELECT 1 FROM jobs WHERE job_uid = $1 AND state = 'running'", [uid])).rowCount === 1, { what: 'the job in the table', timeoutMs: 30_000 });
    // The node is B's (its connection, a live lease): A passes the long poll on to B (docs/farm.md, "Many portals:
    // the proxy"). A holds such a request itself, on the outbox's job.exited, only for a node no replica holds.
    const proxied = a.portal.proxy!.stats.total;
    const answer = fetch(`${a.url}/api/v2/jobs${uid}/await_completion`, { headers: { Authorization: `token ${runner}` } });
    await waitFor(() => b.portal.hub.forwardsInFlight() === 1, { what: 'B to hold the long poll A passed on, forwarded to its node', timeoutMs: 30_000 });
    // A's read-your-writes listeners hear of the results B stores (result_stored on the farmhand channel).
    const heard = new Set<string>();
    const stop = a.portal.results.onPut((jobs) => jobs.forEach((j) => heard.add(j)));
    await writeFile(gate, '');
    await waitFor(() => heard.has(uid), { what: 'A to hear of the result B stored', timeoutMs: 30_000 });
    stop();
    const done = await answer;
    expect(done.status, await done.clone().text()).to.equal(200);
    expect(a.portal.proxy!.stats.total, 'passed on by A').to.equal(proxied + 1);
    expect(await done.json()).to.deep.include({ job_uid: uid, status: 'exited' }).and.nested.include({ 'result_counts.pass': 1 });
  });

  it('one storage folder: a file being written through A is not written through B meanwhile; completed on B, A has it', async () => {
    const node = 'up-node';
    const credential = await registerNode(a.db, node);
    const headers = { Authorization: `node ${credential}`, 'X-Farmhand-Node': node };
    const file = `/farm/v1/results/${node}/abcd/1/2026-11-24_01.02.03/files/big.bin`;
    const half = 64 * 1024;
    const bytes = randomBytes(2 * half);
    // A chunk through A, of which only the first half has arrived: the request stays open.
    const reqA = httpRequest(`${a.url}${file}?offset=0`, { method: 'PUT', headers: { ...headers, 'Content-Length': String(bytes.length) } });
    const answerA = new Promise<number>((resolve, reject) => {
      reqA.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      reqA.on('error', reject);
    });
    reqA.write(bytes.subarray(0, half));
    await waitFor(async () => (await rawRequest(b.url, 'GET', file, undefined, headers)).json.offset === half, { what: "A's first half on the shared storage", timeoutMs: 30_000 });
    // Through B, at the offset the storage holds: refused while A writes (today both would append).
    const during = await rawRequest(b.url, 'PUT', `${file}?offset=${half}`, randomBytes(half), headers);
    expect(during.status, during.text).to.equal(409);
    expect(during.json).to.include({ error: 'conflict' }).and.not.to.have.property('offset');
    reqA.end(bytes.subarray(half));
    expect(await answerA).to.equal(200);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const done = await rawRequest(b.url, 'POST', file, JSON.stringify({ sha256 }), { ...headers, 'Content-Type': 'application/json' });
    expect(done.status, done.text).to.equal(200);
    expect((await rawRequest(a.url, 'GET', file, undefined, headers)).json).to.deep.equal({ offset: 0, complete_size: bytes.length });
    expect((await a.db.query("SELECT 1 FROM upload_locks WHERE file_key LIKE 'up-node.%'")).rowCount, 'every lease of its files released').to.equal(0);
  });

  it('the farmhand channel listens again after its connection is cut, and wakes waiters then', async () => {
    const w = b.portal.wakeups;
    const pid = w.listenerPid;
    expect(pid).to.be.a('number');
    const before = w.reconnects;
    await a.db.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(() => w.reconnects > before && w.listening, { what: "B's LISTEN connection to come back", timeoutMs: 60_000 });
    const heard = w.received;
    await a.portal.wakeups.notify('result_stored', { result_id: 'x' });
    await waitFor(() => w.received > heard, { what: 'B to hear A again', timeoutMs: 30_000 });
  });
});
