/**
 * Push events through a real daemon: GET /api/v2/events read by a real HTTP
 * client (a job's events in order, resume with Last-Event-ID, reservations,
 * key presses, the client limit, shutdown with a stream open), and a webhook
 * endpoint that fails twice and then accepts (three deliveries, one success,
 * every signature valid).
 */
import { expect } from 'chai';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { SseClient, type SseMessage } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-test';
const PASS = 'tests/basic.py::test_pass';
const PRESS = 'tests/press.py::test_press';
const FILES = {
  ...STANDARD_FILES,
  'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF,
  'tests/press.py': 'import farmhand\n\ndef test_press():\n    farmhand.press("KEY_OK")\n',
};
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

interface Delivery {
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
}

/** A webhook receiver that answers 500 to the first `failures` requests, then 200. */
async function receiver(failures: number) {
  const got: Delivery[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = got.length < failures ? 500 : 200;
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { got, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/farmhand?key=do-not-log`, close: () => new Promise((r) => server.close(r)) };
}

/** Standard Webhooks by hand: base64 HMAC-SHA256 of "id.timestamp.body" with the secret's bytes. */
function signatureValid(secret: string, d: Delivery): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${String(d.headers['webhook-id'])}.${String(d.headers['webhook-timestamp'])}.${d.body}`).digest();
  return String(d.headers['webhook-signature'])
    .split(' ')
    .some((s) => s.startsWith('v1,') && Buffer.from(s.slice(3), 'base64').length === expected.length && timingSafeEqual(Buffer.from(s.slice(3), 'base64'), expected));
}

describe('push events: the event stream and webhooks', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let hook: Awaited<ReturnType<typeof receiver>>;
  let alice: Awaited<ReturnType<typeof asUser>>;
  let auth: Record<string, string>;
  let stream: SseClient;
  const clients: SseClient[] = [];
  const open = async (query = '', headers: Record<string, string> = {}) => {
    const c = await SseClient.open(`${d.url}/api/v2/events${query}`, { ...auth, ...headers });
    clients.push(c);
    return c;
  };

  before(async () => {
    hook = await receiver(2);
    d = await startTestDaemon({
      files: FILES,
      config: {
        ir: { uri: 'virtual:' },
        capture: { uri: 'virtual:', width: 320, height: 180 },
        events: { max_clients: 3, health_poll_secs: 0.1 },
        webhooks: { endpoints: [{ url: hook.url, secret: SECRET, types: ['reservation.made'] }], backoff_initial_ms: 1, backoff_max_ms: 5 },
      },
    });
    alice = await asUser(d, 'alice');
    auth = { Authorization: `token ${alice.token}` };
    await waitOnline(d);
    stream = await open();
  });
  after(async () => {
    for (const c of clients) c.close();
    await d?.stop();
    await hook?.close();
  });

  it('answers text/event-stream to a token holder, and 403 without a token, like every v2 read', async () => {
    expect(stream.res.statusCode).to.equal(200);
    expect(stream.res.headers['content-type']).to.match(/^text\/event-stream/);
    expect(stream.res.headers['cache-control']).to.include('no-cache');
    const anon = await SseClient.open(`${d.url}/api/v2/events`);
    expect(anon.res.statusCode).to.equal(403);
    expect(JSON.parse(await anon.text())).to.include({ error: 'forbidden' });
    expectError(await alice.get('/api/v2/events?last_event_id=yesterday'), 400, 'invalid_request');
    const before = d.daemon.services.events!.stream.clientsConnected;
    const head = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(`${d.url}/api/v2/events`, { method: 'HEAD', headers: auth }, resolve);
      req.on('error', reject).end();
    });
    expect(head.statusCode).to.equal(200);
    expect(head.headers['content-type']).to.match(/^text\/event-stream/);
    expect(d.daemon.services.events!.stream.clientsConnected, 'HEAD holds no stream').to.equal(before);
  });

  it('/app/events: the same stream for the portal pages, open without a token when v1 is open (auth.v1_requires_token false)', async () => {
    const before = d.daemon.services.events!.stream.clientsConnected;
    const page = await SseClient.open(`${d.url}/app/events`);
    expect(page.res.statusCode).to.equal(200);
    expect(page.res.headers['content-type']).to.match(/^text\/event-stream/);
    // A key press: the webhook of this file is for reservations only, and counts its deliveries.
    expect((await alice.post(`/api/v2/nodes/${NODE}/press`).send({ key: 'KEY_INFO', remote_control: 'vstb' })).status).to.equal(204);
    const pressed = await page.next((m) => m.event === 'key.pressed', 'key.pressed on /app/events');
    expect(pressed.data.data).to.include({ key: 'KEY_INFO', source: 'api', username: 'alice' });
    page.close(); // the later tests count the clients
    await waitFor(() => d.daemon.services.events!.stream.clientsConnected === before, 'the page stream to be gone');
  });

  it('a job: job.started, run.started, run.finished with its outcome, job.exited, in that order', async () => {
    const run = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], remote_control: 'vstb' });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    await stream.next((m) => m.event === 'job.exited' && (m.data.data as { job_uid: string }).job_uid === uid, 'job.exited');
    const mine = stream.messages.filter((m) => (m.data.data as { job_uid?: string }).job_uid === uid);
    expect(mine.map((m) => m.event)).to.deep.equal(['job.started', 'run.started', 'run.finished', 'job.exited']);
    const finished = mine[2]!.data;
    expect(finished).to.include({ type: 'run.finished', id: mine[2]!.id });
    expect(finished.data).to.include({ node_id: NODE, job_uid: uid, test_case: PASS, result: 'pass', failure_reason: null, infrastructure_error: null });
    expect(mine[3]!.data.data).to.deep.include({ result_counts: { pass: 1, fail: 0, error: 0, total: 1 } });
    // Ids increase in the order of the stream.
    const seqs = mine.map((m) => Number(m.id!.split('-')[1]));
    expect(seqs).to.deep.equal([...seqs].sort((a, b) => a - b));
  });

  it("a test script's key press: key.pressed from the script, naming its run, between run.started and run.finished", async () => {
    const run = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [PRESS], remote_control: 'vstb' });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    await stream.next((m) => m.event === 'job.exited' && (m.data.data as { job_uid: string }).job_uid === uid, 'job.exited');
    // node.offline/online may come between on a loaded machine (the capture stalling): only this job's events count.
    const jobs = stream.messages.filter((m) => !m.event.startsWith('node.'));
    const started = jobs.findIndex((m) => m.event === 'run.started' && (m.data.data as { job_uid: string }).job_uid === uid);
    const [runStarted, pressed, finished] = jobs.slice(started, started + 3);
    expect([runStarted, pressed, finished].map((m) => m?.event)).to.deep.equal(['run.started', 'key.pressed', 'run.finished']);
    expect(finished!.data.data).to.include({ result: 'pass' });
    const resultId = (runStarted!.data.data as { result_id: string }).result_id;
    expect(pressed!.data.data).to.include({ key: 'KEY_OK', remote: 'vstb', source: 'script', username: null, result_id: resultId });
  });

  it('resume: Last-Event-ID (or ?last_event_id=) gets only the later events; an id of an earlier boot gets stream.missed first', async () => {
    // The first job's events; the second job's followed them.
    const [, runStarted, runFinished, jobExited] = stream.of('job.started', 'run.started', 'run.finished', 'job.exited');
    const after = stream.messages.slice(stream.messages.indexOf(runStarted!) + 1).map((m) => m.id);
    const last = stream.messages.at(-1)!.id;
    const resumed = await open('', { 'Last-Event-ID': runStarted!.id! });
    await resumed.next((m) => m.id === last, 'the replay up to the latest event');
    // Up to `last`: an event published since (a capture stall on a loaded machine) may follow it.
    expect(resumed.messages.slice(0, resumed.messages.findIndex((m) => m.id === last) + 1).map((m) => m.id)).to.deep.equal(after);
    expect(after.slice(0, 2)).to.deep.equal([runFinished!.id, jobExited!.id]);
    resumed.close();

    const byQuery = await open(`?last_event_id=${encodeURIComponent(runFinished!.id!)}`);
    await byQuery.next((m) => m.id === jobExited!.id, 'the replayed job.exited');
    expect(byQuery.messages[0]!.id).to.equal(jobExited!.id);
    byQuery.close();

    const stale = await open('', { 'Last-Event-ID': 'abc123-7' });
    const missed = await stale.next((m) => m.event === 'stream.missed', 'stream.missed');
    expect(stale.messages[0]).to.equal(missed);
    expect(missed.id).to.equal(undefined);
    expect(missed.data).to.include({ reason: 'restarted', last_event_id: 'abc123-7' });
    // Then everything buffered, from the first event of this run.
    expect(stale.messages[1]!.id).to.match(/-1$/);
    stale.close();
  });

  it('a reservation and a key press produce their events; the webhook is POSTed three times, accepted once, signed every time', async () => {
    const made = await alice.post('/api/v2/reservations').send({ node_ids: [NODE], message: 'events test', duration_secs: 600 });
    expect(made.status, made.text).to.equal(200);
    const id = made.body.reservations[0].reservation_id as number;
    expect((await alice.post(`/api/v2/nodes/${NODE}/press`).send({ key: 'KEY_OK', remote_control: 'vstb' })).status).to.equal(204);
    expect((await alice.delete(`/api/v2/reservations/${id}`)).status).to.equal(204);

    const ended = await stream.next((m) => m.event === 'reservation.ended', 'reservation.ended');
    expect(stream.of('reservation.made')[0]!.data.data).to.include({ reservation_id: id, username: 'alice', message: 'events test' });
    expect(stream.of('key.pressed').at(-1)!.data.data).to.include({ key: 'KEY_OK', remote: 'vstb', source: 'api', username: 'alice', result_id: null });
    expect(ended.data.data).to.include({ reservation_id: id, how: 'ended', by: 'alice' });

    const webhooks = d.daemon.services.events!.webhooks;
    await waitFor(() => webhooks.deliveries().delivered === 1, 'the webhook to be accepted');
    expect(hook.got.map((g) => g.status)).to.deep.equal([500, 500, 200]);
    expect(webhooks.deliveries()).to.deep.equal({ delivered: 1, failed_attempts: 2, abandoned: 0, dropped: 0 });
    const verifier = new Webhook(SECRET);
    for (const g of hook.got) {
      expect(signatureValid(SECRET, g), 'HMAC by hand').to.equal(true);
      expect(() => verifier.verify(g.body, g.headers as Record<string, string>), 'standardwebhooks verify').to.not.throw();
      expect(g.headers['content-type']).to.match(/^application\/cloudevents\+json/);
    }
    // One event, three attempts: the same webhook-id; a body signed with another secret does not verify.
    expect(new Set(hook.got.map((g) => g.headers['webhook-id'])).size).to.equal(1);
    expect(signatureValid(`whsec_${randomBytes(32).toString('base64')}`, hook.got[2]!)).to.equal(false);
    const ce = JSON.parse(hook.got[2]!.body) as Record<string, unknown>;
    expect(ce).to.include({ specversion: '1.0', type: 'farmhand.reservation.made', source: `urn:farmhand:node:${NODE}`, id: hook.got[2]!.headers['webhook-id'], subject: `reservation/${id}` });
    expect(ce.data).to.include({ reservation_id: id, node_id: NODE });
    expect(ce.id).to.equal(stream.of('reservation.made')[0]!.id);
  });

  it('a client that does not read is cut off once its backlog passes the bound; the others and the publisher carry on', async () => {
    const ev = d.daemon.services.events!;
    const slow = await open();
    slow.res.pause(); // reads nothing more: the socket buffers fill, then the daemon's
    const before = stream.messages.length;
    const big = 'x'.repeat(64 * 1024);
    let sent = 0;
    // Bounded: 64 KiB a step, at most 256 MiB; each step yields so the reading client drains.
    while (ev.stream.clientsDropped === 0 && sent < 4096) {
      ev.hub.publish('key.pressed', { key: 'KEY_BIG', remote: big, hold_ms: 0, source: 'api', username: 'test', result_id: null });
      sent++;
      await new Promise((r) => setImmediate(r));
    }
    expect(ev.stream.clientsDropped, `dropped after ${sent} events`).to.equal(1);
    slow.res.resume(); // read what got through: the connection then ends
    await waitFor(() => slow.ended, 'the slow client to be disconnected');
    const bigOnes = () => stream.messages.slice(before).filter((m) => (m.data.data as { key?: string }).key === 'KEY_BIG').length;
    await stream.next((_m) => bigOnes() === sent, `the reading client to get all ${sent} events`);
    expect(ev.stream.clientsConnected).to.equal(1);
  });

  it('past events.max_clients a new client gets 503 JSON; the counts are exposed', async () => {
    const ev = d.daemon.services.events!;
    await waitFor(() => ev.stream.clientsConnected === 1, 'the closed streams to be gone');
    const two = await open();
    const three = await open();
    expect([two.res.statusCode, three.res.statusCode]).to.deep.equal([200, 200]);
    const four = await open();
    expect(four.res.statusCode).to.equal(503);
    expect(JSON.parse(await four.text())).to.include({ error: 'device_unavailable' });
    expect(ev.stream.clientsConnected).to.equal(3);
    expect(ev.stream.clientsRejected).to.equal(1);
    expect(ev.hub.published).to.be.greaterThan(6);
    two.close();
    three.close();
    await waitFor(() => ev.stream.clientsConnected === 1, 'the streams to close');
  });

  it('the capture stopping and starting again: node.offline with the reason, then node.online', async () => {
    const frames = d.daemon.services.frames;
    const from = stream.messages.length; // a loaded machine may have stalled the capture before: only what follows counts
    const after = (type: string) => (m: SseMessage) => m.event === type && stream.messages.indexOf(m) >= from;
    await frames.stop();
    const offline = await stream.next((m) => after('node.offline')(m) && (m.data.data as { reason: string }).reason === 'capture stopped', 'node.offline');
    expect(offline.data.data).to.include({ online: false, reason: 'capture stopped' });
    await frames.start();
    const online = await stream.next((m) => after('node.online')(m) && stream.messages.indexOf(m) > stream.messages.indexOf(offline), 'node.online');
    expect(online.data.data).to.include({ online: true, reason: null });
    expect(Number(online.id!.split('-')[1])).to.be.greaterThan(Number(offline.id!.split('-')[1]));
  });

  it('stopping the daemon ends the open streams instead of waiting on them', async () => {
    expect(stream.ended).to.equal(false);
    await d.daemon.stop();
    await waitFor(() => stream.ended, 'the stream to end');
  });
});
