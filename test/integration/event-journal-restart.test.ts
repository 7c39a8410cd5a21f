/**
 * The event journal through a real daemon: a client reads the event stream up to one event and goes away; the
 * node runs a job (events nobody read), is SIGKILLed and started again on the same data directory. The client
 * resuming from the last id it saw gets every event after it, in order, once, then the new run's.
 */
import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';
import { kill, startCli } from './crash-lib.js';

const NODE_ID = 'journal-node';

describe('event journal: SIGKILL and restart lose no event nobody had read', function () {
  this.timeout(120_000);
  let pack: TestPackRepo;
  let root: string;
  let dataDir: string;
  let configFile: string;
  let token: string;
  const children: ChildProcess[] = [];
  const streams: SseClient[] = [];

  before(async () => {
    pack = await makeTestPack({
      'tests/quick.py': 'def test_one():\n    pass\n\ndef test_two():\n    assert False\n',
      'config/stbt.conf': '[test_pack]\ndefault_remote_control = vstb\n',
      'config/remote-control/vstb.lircd.conf': 'begin remote\n  name vstb\nend remote\n',
    });
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-journal-'));
    dataDir = path.join(root, 'data');
    configFile = path.join(root, 'farmhand.json');
    const cfg = { node_id: NODE_ID, listen: '127.0.0.1:0', data_dir: dataDir, test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'warn', runner: { kill_grace_secs: 1, run_tests_as: false } };
    await writeFile(configFile, JSON.stringify(cfg));
    ({ token } = await new TokenStore(tokensFile(dataDir)).create('alice'));
  });
  after(async () => {
    for (const s of streams) s.close();
    for (const c of children) c.kill('SIGKILL');
    await rm(root, { recursive: true, force: true });
    await pack.cleanup();
  });

  const auth = () => ({ Authorization: `token ${token}` });
  async function api(url: string, method: string, p: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(url + p, { method, headers: { ...auth(), 'Content-Type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  it('a resume from the last id seen before the kill gets every event of the job run meanwhile, once, in order, then the new run', async () => {
    const first = await startCli(configFile);
    children.push(first.child);

    // A client follows the stream and sees the reservation, then goes away.
    const before = await SseClient.open(`${first.url}/api/v2/events`, auth());
    streams.push(before);
    expect(before.res.statusCode).to.equal(200);
    const resv = await api(first.url, 'POST', '/api/v2/reservations', { node_ids: [NODE_ID], message: 'journal test' });
    expect(resv.status, JSON.stringify(resv.body)).to.equal(200);
    const seen = await before.next((m) => m.event === 'reservation.made', 'reservation.made on the stream');
    before.close();
    const lastSeen = seen.id!;

    // A job nobody watches; once its file says exited, its job.exited was published (the same tick).
    const run = await api(first.url, 'POST', '/api/v2/run_tests', { node_id: NODE_ID, test_pack_revision: 'main', test_cases: ['tests/quick.py::test_one', 'tests/quick.py::test_two'], tags: {} });
    expect(run.status, JSON.stringify(run.body)).to.equal(200);
    const uid = run.body.job_uid as string;
    const jobFile = path.join(dataDir, 'jobs', `${uid.split('/').pop()}.json`);
    await waitFor(async () => (JSON.parse(await readFile(jobFile, 'utf8').catch(() => '{}')) as { status?: string }).status === 'exited', {
      what: 'the job to be saved exited',
      timeoutMs: 60_000,
    });
    await kill(first);

    const second = await startCli(configFile);
    children.push(second.child);
    const after = await SseClient.open(`${second.url}/api/v2/events`, { ...auth(), 'Last-Event-ID': lastSeen });
    streams.push(after);
    expect(after.res.statusCode).to.equal(200);
    // Something of the new run after the replay: end the reservation.
    const end = await api(second.url, 'DELETE', `/api/v2/reservations/${resv.body.reservations[0].reservation_id}`);
    expect(end.status, JSON.stringify(end.body)).to.be.oneOf([200, 204]);
    await after.next((m) => m.event === 'reservation.ended', 'reservation.ended of the new run');
    after.close();

    expect(after.of('stream.missed'), 'nothing reported missed').to.deep.equal([]);
    // Each message's data is the whole event ({id, type, time, data}).
    const payload = (m: (typeof after.messages)[number]) => (m.data as { data: { job_uid?: string; test_case?: string } }).data;
    const got = after.messages.map((m) => ({ id: m.id!, event: m.event, job: payload(m).job_uid, test: payload(m).test_case }));
    const job = got.filter((m) => m.job === uid);
    expect(job.map((m) => [m.event, m.test])).to.deep.equal([
      ['job.started', undefined],
      ['run.started', 'tests/quick.py::test_one'],
      ['run.finished', 'tests/quick.py::test_one'],
      ['run.started', 'tests/quick.py::test_two'],
      ['run.finished', 'tests/quick.py::test_two'],
      ['job.exited', undefined],
    ]);
    // The job's events come first, all of the earlier run; the new run's after; no id twice, none the client had.
    const ids = got.map((m) => m.id);
    expect(new Set(ids).size).to.equal(ids.length);
    expect(ids).to.not.include(lastSeen);
    const bootOf = (id: string) => parseInt(id.split('-')[0]!, 36);
    expect(got.slice(0, job.length).map((m) => m.job)).to.deep.equal(job.map(() => uid));
    expect(job.every((m) => bootOf(m.id) === bootOf(lastSeen))).to.equal(true);
    expect(bootOf(got.at(-1)!.id)).to.be.greaterThan(bootOf(lastSeen));
    expect(got.at(-1)!.event).to.equal('reservation.ended');
  });
});
