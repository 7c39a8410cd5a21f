/**
 * The webhook dispatcher against real HTTP receivers on loopback: attempts
 * are bounded, a full queue drops its oldest waiting event while the
 * publisher never waits, a refused connection is a failed attempt, types
 * filter. Back-off delays are configured down to milliseconds.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { configSchema } from '../../src/config/schema.js';
import { EventHub } from '../../src/core/events.js';
import { silentLogger } from '../../src/logger.js';
import { redactUrls, WebhookDispatcher, type WebhookSettings } from '../../src/notify/webhooks.js';
import { loadConfig } from '../../src/config/load.js';
import { capturingLogger } from '../helpers/logger.js';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitFor } from '../helpers/wait.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const press = (key: string) => ({ key, remote: 'tv', hold_ms: 0, source: 'api' as const, username: 'alice', result_id: null });

/** A receiver whose answer a test decides per request (it may also hold a request until released). */
async function receiver(answer: (n: number) => number | 'hold') {
  const got: Array<{ body: string; headers: http.IncomingHttpHeaders }> = [];
  const held: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const a = answer(got.length);
      got.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
      if (a === 'hold') held.push(() => res.writeHead(200).end());
      else res.writeHead(a).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    got,
    url,
    release: () => held.splice(0).forEach((f) => f()),
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

function dispatcher(url: string, over: Partial<WebhookSettings> = {}) {
  const hub = new EventHub({ nodeId: 'node-1' });
  const settings: WebhookSettings = { endpoints: [{ url, secret: SECRET }], max_attempts: 3, backoff_initial_ms: 1, backoff_max_ms: 4, timeout_secs: 10, queue_size: 100, ...over };
  const w = new WebhookDispatcher({ settings, userAgent: 'farmhand/test', logger: silentLogger });
  w.attach(hub);
  return { hub, w };
}

describe('webhook delivery', function () {
  this.timeout(30_000);
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('gives an event up after max_attempts failed attempts, and goes on with the next', async () => {
    const r = await receiver((n) => (n < 3 ? 503 : 200));
    const { hub, w } = dispatcher(r.url, { max_attempts: 3 });
    cleanups.push(() => w.close(), r.close);
    hub.publish('key.pressed', press('KEY_1'));
    hub.publish('key.pressed', press('KEY_2'));
    await waitFor(() => w.deliveries().delivered === 1, 'the second event to be delivered');
    expect(w.deliveries()).to.deep.equal({ delivered: 1, failed_attempts: 3, abandoned: 1, dropped: 0 });
    const keys = r.got.map((g) => (JSON.parse(g.body) as { data: { key: string } }).data.key);
    expect(keys).to.deep.equal(['KEY_1', 'KEY_1', 'KEY_1', 'KEY_2']);
    for (const g of r.got) expect(() => new Webhook(SECRET).verify(g.body, g.headers as Record<string, string>)).to.not.throw();
  });

  it('a full queue drops its oldest waiting event; publishing never waits for the receiver', async () => {
    const r = await receiver((n) => (n === 0 ? 'hold' : 200));
    const { hub, w } = dispatcher(r.url, { queue_size: 2 });
    cleanups.push(() => w.close(), r.close);
    hub.publish('key.pressed', press('KEY_1'));
    await waitFor(() => r.got.length === 1, 'the first event to reach the receiver');
    // The receiver holds the first request: these only queue.
    for (const k of ['KEY_2', 'KEY_3', 'KEY_4']) hub.publish('key.pressed', press(k));
    expect(w.deliveries().dropped).to.equal(1);
    expect(w.queued).to.equal(3); // one in flight, two waiting
    r.release();
    await waitFor(() => w.deliveries().delivered === 3, 'the rest to be delivered');
    expect(r.got.map((g) => (JSON.parse(g.body) as { data: { key: string } }).data.key)).to.deep.equal(['KEY_1', 'KEY_3', 'KEY_4']);
  });

  it('drain: the attempt in flight gets its answer and counts; nothing new is sent; what waits stays the head', async () => {
    const r = await receiver((n) => (n === 0 ? 'hold' : 200));
    const { hub, w } = dispatcher(r.url);
    cleanups.push(() => w.close(), r.close);
    hub.publish('key.pressed', press('KEY_1'));
    await waitFor(() => r.got.length === 1, 'the first event to reach the receiver');
    hub.publish('key.pressed', press('KEY_2'));
    const drained = w.drain(10_000);
    r.release();
    await drained;
    expect(w.deliveries().delivered).to.equal(1);
    expect(r.got).to.have.length(1);
    // KEY_2 was never sent: it is what a farm's cursor must stop before.
    expect(w.pendingHeads().map((e) => (e.data as { key: string }).key)).to.deep.equal(['KEY_2']);
    hub.publish('key.pressed', press('KEY_3')); // after drain: not taken
    expect(w.queued).to.equal(1);
  });

  it('drain: an attempt that fails while draining is not retried and stays the head; drain gives up after its time', async () => {
    const failing = await receiver(() => 503);
    const a = dispatcher(failing.url, { max_attempts: 5, backoff_initial_ms: 60_000, backoff_max_ms: 60_000 });
    cleanups.push(() => a.w.close(), failing.close);
    a.hub.publish('key.pressed', press('KEY_1'));
    await waitFor(() => a.w.deliveries().failed_attempts === 1, 'the first attempt to fail');
    await a.w.drain(10_000); // in its back-off wait: nothing in flight
    expect(a.w.pendingHeads().map((e) => (e.data as { key: string }).key)).to.deep.equal(['KEY_1']);
    expect(failing.got).to.have.length(1);

    const silent = await receiver(() => 'hold');
    const b = dispatcher(silent.url);
    cleanups.push(() => b.w.close(), silent.close);
    b.hub.publish('key.pressed', press('KEY_9'));
    await waitFor(() => silent.got.length === 1, 'the event to reach the silent receiver');
    await b.w.drain(1); // the answer never comes: drain returns anyway
    expect(b.w.pendingHeads().map((e) => (e.data as { key: string }).key)).to.deep.equal(['KEY_9']);
    b.w.close();
    silent.release();
  });

  it('a refused connection is a failed attempt; an endpoint with types gets only those', async () => {
    const r = await receiver(() => 200);
    const closed = await receiver(() => 200);
    await closed.close();
    const hub = new EventHub({ nodeId: 'node-1' });
    const settings: WebhookSettings = {
      endpoints: [
        { url: closed.url, secret: SECRET },
        { url: r.url, secret: SECRET, types: ['node.offline'] },
      ],
      max_attempts: 2,
      backoff_initial_ms: 1,
      backoff_max_ms: 2,
      timeout_secs: 10,
      queue_size: 10,
    };
    const w = new WebhookDispatcher({ settings, userAgent: 'farmhand/test', logger: silentLogger });
    w.attach(hub);
    cleanups.push(() => w.close(), r.close);
    hub.publish('key.pressed', press('KEY_1'));
    hub.publish('node.offline', { online: false, reason: 'capture stopped' });
    await waitFor(() => w.deliveries().abandoned === 2 && w.deliveries().delivered === 1, 'both endpoints to be done');
    expect(w.deliveries()).to.deep.equal({ delivered: 1, failed_attempts: 4, abandoned: 2, dropped: 0 });
    expect(r.got.map((g) => (JSON.parse(g.body) as { type: string }).type)).to.deep.equal(['farmhand.node.offline']);
  });

  it('the config accepts whsec_ secrets of 24 bytes or more and http(s) URLs only', () => {
    const parse = (endpoint: Record<string, unknown>) => configSchema.safeParse({ test_pack: { url: '/x' }, webhooks: { endpoints: [endpoint] } });
    expect(parse({ url: 'https://ci.example/hook', secret: SECRET }).success).to.equal(true);
    expect(parse({ url: 'https://ci.example/hook', secret: 'whsec_c2hvcnQ=' }).success, 'too short').to.equal(false);
    expect(parse({ url: 'https://ci.example/hook', secret: 'hunter2hunter2hunter2hunter2hunter2' }).success, 'no prefix').to.equal(false);
    expect(parse({ url: 'ftp://ci.example/hook', secret: SECRET }).success, 'not http').to.equal(false);
    expect(parse({ url: 'https://ci.example/hook', secret: SECRET, types: ['run.finished'] }).success).to.equal(true);
    expect(parse({ url: 'https://ci.example/hook', secret: SECRET, types: ['run.done'] }).success, 'unknown type').to.equal(false);
  });

  it('a URL with user:password@ is refused at config load, with what to do instead', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-webhook-cfg-'));
    const file = path.join(dir, 'config.json');
    await writeFile(file, JSON.stringify({ test_pack: { url: '/x' }, webhooks: { endpoints: [{ url: 'https://ci:hunter2secret@ci.example/hook', secret: SECRET }] } }));
    let problems: string[] = [];
    try {
      loadConfig(file);
    } catch (e) {
      problems = (e as { problems: string[] }).problems;
    }
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/^webhooks\.endpoints\.0\.url: must not carry a user name or password/);
    expect(problems[0]).to.contain('webhook-signature');
    expect(problems[0], 'the password is not echoed').to.not.contain('hunter2secret');
    const parse = (url: string) => configSchema.safeParse({ test_pack: { url: '/x' }, webhooks: { endpoints: [{ url, secret: SECRET }] } }).success;
    expect(parse('https://user@ci.example/hook'), 'a user name alone').to.equal(false);
    expect(parse('https://ci.example/hook?key=abc'), 'a query is fine').to.equal(true);
  });

  it("a failed attempt's log never carries the URL's password or query, whatever the error quotes", async () => {
    const log = capturingLogger();
    const hub = new EventHub({ nodeId: 'node-1' });
    // Past the config (which refuses it): the dispatcher given such a URL directly, as a programming error would.
    const settings: WebhookSettings = {
      endpoints: [{ url: 'http://ci:hunter2secret@127.0.0.1:9/hook?key=querysecret', secret: SECRET }],
      max_attempts: 2,
      backoff_initial_ms: 1,
      backoff_max_ms: 2,
      timeout_secs: 10,
      queue_size: 10,
    };
    const w = new WebhookDispatcher({ settings, userAgent: 'farmhand/test', logger: log });
    w.attach(hub);
    cleanups.push(() => w.close());
    hub.publish('key.pressed', press('KEY_1'));
    await waitFor(() => w.deliveries().abandoned === 1, 'the event to be abandoned');
    const failed = log.entries.filter((e) => e.msg === 'webhook attempt failed' || e.msg === 'webhook abandoned: every attempt failed');
    expect(failed).to.have.length(2);
    expect(String(failed[0]!.obj.error)).to.contain('http://127.0.0.1:9/hook');
    expect(log.text()).to.not.contain('hunter2secret');
    expect(log.text()).to.not.contain('querysecret');
    expect(redactUrls('fetch failed for https://u:p@h.example:8443/a/b?t=1#x, then ws://x/y?z')).to.equal('fetch failed for https://h.example:8443/a/b, then ws://x/y');
  });
});
