// Who gets an event stream (docs/events.md, "Who gets a stream"; issue 22): a share per caller,
// half the slots kept for signed-in people, and a stream that ends as soon as its credential does
// (`farmhand token revoke`, sign-out). Over HTTP against a real daemon with the shipped
// events.max_clients (64) and events.max_clients_per_caller (8).
import { expect } from 'chai';
import http from 'node:http';
import { tokenCommand } from '../../src/cli/token.js';
import { asUser } from '../helpers/auth.js';
import { runCaptured } from '../helpers/cli.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';

/** A stream request from a chosen loopback address (Linux answers every 127.x.y.z); resolves on the status line. */
function openFrom(url: string, localAddress: string, headers: Record<string, string> = {}): Promise<{ status: number; req: http.ClientRequest; ended: () => boolean }> {
  return new Promise((resolve, reject) => {
    let ended = false;
    const req = http.get(url, { localAddress, agent: false, headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
      res.resume();
      res.on('close', () => (ended = true));
      resolve({ status: res.statusCode ?? 0, req, ended: () => ended });
    });
    req.on('error', reject);
  });
}

describe('event streams: a share per caller, slots kept for signed-in people, revocation', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  const held: http.ClientRequest[] = [];
  const clients: SseClient[] = [];

  before(async () => {
    d = await startTestDaemon();
  });
  afterEach(async () => {
    for (const r of held.splice(0)) r.destroy();
    for (const c of clients.splice(0)) c.close();
    await waitFor(() => d.daemon.services.events!.stream.clientsConnected === 0, 'every stream to be gone');
  });
  after(async () => {
    await d?.stop();
  });

  const stream = () => d.daemon.services.events!.stream;

  it('70 anonymous streams from one address get 8; from many addresses at most half of 64; a token holder still gets in', async () => {
    expect(d.config.events.max_clients).to.equal(64);
    const url = `${d.url}/app/events`;
    const one: number[] = [];
    for (let i = 0; i < 70; i++) {
      const r = await openFrom(url, '127.0.0.1');
      held.push(r.req);
      one.push(r.status);
    }
    expect(one.filter((s) => s === 200)).to.have.length(8);
    expect(one.filter((s) => s === 503)).to.have.length(62);
    // Nine more addresses: the anonymous half (32) is all they get together.
    let ok = 0;
    for (let a = 2; a <= 10; a++) {
      for (let i = 0; i < 8; i++) {
        const r = await openFrom(url, `127.0.0.${a}`);
        held.push(r.req);
        if (r.status === 200) ok++;
      }
    }
    expect(8 + ok).to.equal(32);
    expect(stream().clientsConnected).to.equal(32);
    const alice = await asUser(d, 'alice');
    const mine = await SseClient.open(`${d.url}/api/v2/events`, { Authorization: `token ${alice.token}` });
    clients.push(mine);
    expect(mine.res.statusCode, 'the token holder gets a stream').to.equal(200);
    // And the token's own share is 8 as well.
    const more: number[] = [];
    for (let i = 0; i < 8; i++) {
      const c = await SseClient.open(`${d.url}/api/v2/events`, { Authorization: `token ${alice.token}` });
      clients.push(c);
      more.push(c.res.statusCode!);
    }
    expect(more.filter((s) => s === 200)).to.have.length(7);
    expect(more.at(-1)).to.equal(503);
  });

  it("a token's open stream ends right after `farmhand token revoke`; another token's stays", async () => {
    const carol = await asUser(d, 'carol');
    const dave = await asUser(d, 'dave');
    const hers = await SseClient.open(`${d.url}/api/v2/events`, { Authorization: `token ${carol.token}` });
    const his = await SseClient.open(`${d.url}/api/v2/events`, { Authorization: `token ${dave.token}` });
    clients.push(hers, his);
    expect([hers.res.statusCode, his.res.statusCode]).to.deep.equal([200, 200]);
    const run = await runCaptured(tokenCommand, ['revoke', carol.token.slice(3, 11), '--data-dir', d.dataDir]);
    expect(run.code, run.err).to.equal(0);
    await waitFor(() => hers.ended, { what: "the revoked token's stream to end", timeoutMs: 30_000 });
    // The same pass over the open streams that ended hers checked his: still open.
    expect(his.ended).to.equal(false);
    expect(stream().clientsConnected).to.equal(1);
  });

  it("signing out ends the session's open streams at once", async () => {
    const erin = await asUser(d, 'erin');
    const res = await d.http.post('/app/sign-in').type('form').send({ token: erin.token, next: '/' });
    const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('farmhand_session='))!.split(';')[0]!;
    const page = await d.http.get('/').set('Cookie', cookie).set('Accept', 'text/html');
    const csrf = /<meta name="csrf-token" content="([^"]+)"/.exec(page.text)![1]!;
    const s = await SseClient.open(`${d.url}/app/events`, { Cookie: cookie });
    clients.push(s);
    expect(s.res.statusCode).to.equal(200);
    expect((await d.http.post('/app/sign-out').set('Cookie', cookie).type('form').send({ csrf })).status).to.equal(303);
    await waitFor(() => s.ended, "the session's stream to end");
    expect(stream().clientsConnected).to.equal(0);
  });
});
