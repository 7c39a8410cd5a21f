// Sign-in for people (docs/portal.md, "Signing in"): the session cookie, the CSRF rule for
// state-changing cookie requests, cross-site posts, revocation, sign-out, and the
// auth.v1_requires_token redirect for browsers. HTTP rules through supertest (every answer
// checked against the OpenAPI document).
import { expect } from 'chai';
import { expectError } from '../helpers/errors.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { asUser } from '../helpers/auth.js';
import { SseClient } from '../helpers/sse.js';
import { SESSIONS_PER_USER } from '../../src/http/session.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';

const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** Sign in through the form; the session cookie (`name=value`) and the CSRF token of the page. */
async function signIn(d: TestDaemon, token: string, next = '/') {
  const res = await d.http.post('/app/sign-in').type('form').send({ token, next });
  expect(res.status, res.text).to.equal(303);
  const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
  const line = setCookie.find((c) => c.startsWith('farmhand_session='));
  expect(line, 'a session cookie').to.be.a('string');
  const cookie = line!.split(';')[0]!;
  const page = await d.http.get('/').set('Cookie', cookie).set('Accept', HTML);
  expect(page.status).to.equal(200);
  const csrf = /<meta name="csrf-token" content="([^"]+)"/.exec(page.text)?.[1];
  expect(csrf, 'the csrf meta').to.be.a('string');
  return { cookie, csrf: csrf!, line: line!, location: res.headers.location as string };
}

describe('portal: sign-in, sessions and CSRF', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon();
  });
  after(async () => {
    await d?.stop();
  });

  it('signing in sets an HttpOnly, SameSite=Strict, Path=/ cookie (not Secure over http) and goes back to next', async () => {
    const alice = await asUser(d, 'alice');
    const s = await signIn(d, alice.token, '/app/live?x=1');
    expect(s.location).to.equal('/app/live?x=1');
    const attrs = s.line.split(';').map((a) => a.trim().toLowerCase());
    expect(attrs).to.include('httponly');
    expect(attrs).to.include('samesite=strict');
    expect(attrs).to.include('path=/');
    expect(attrs).not.to.include('secure');
    expect(s.cookie.split('=')[1]).to.match(/^[A-Za-z0-9_-]{43}$/);
    const me = await d.http.get('/api/v2/user').set('Cookie', s.cookie);
    expect(me.status).to.equal(200);
    expect(me.body.login).to.equal('alice');
  });

  it('next only goes to paths of this site', async () => {
    const alice = await asUser(d, 'alice');
    for (const bad of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', 'javascript:alert(1)']) {
      const res = await d.http.post('/app/sign-in').type('form').send({ token: alice.token, next: bad });
      expect(res.status).to.equal(303);
      expect(res.headers.location, bad).to.equal('/');
    }
  });

  it('a bad token shows the form again with the error next to the box, and no cookie', async () => {
    const res = await d.http.post('/app/sign-in').set('Accept', 'text/html').type('form').send({ token: 'fh_00000000_' + 'a'.repeat(43), next: '/app/results' });
    expect(res.status).to.equal(403);
    expect(res.headers['set-cookie'] ?? []).to.deep.equal([]);
    expect(res.text).to.contain('id="token-error"');
    expect(res.text).to.contain('aria-invalid="true"');
    expect(res.text).to.contain('value="/app/results"');
    const empty = await d.http.post('/app/sign-in').set('Accept', 'text/html').type('form').send({ token: '' });
    expect(empty.status).to.equal(400);
    // A program that does not ask for HTML gets the API's JSON error.
    expectError(await d.http.post('/app/sign-in').type('form').send({ token: 'fh_00000000_' + 'a'.repeat(43) }), 403, 'forbidden');
    expectError(await d.http.post('/app/sign-in').type('form').send({ token: '' }), 400, 'invalid_request');
  });

  it('a state-changing cookie request needs the session CSRF token: refused without it or with a wrong one, accepted with it', async () => {
    const alice = await asUser(d, 'alice');
    const s = await signIn(d, alice.token);
    const body = { node_ids: ['farmhand-test'], message: 'testing the csrf rule' };
    const none = await d.http.post('/api/v2/reservations').set('Cookie', s.cookie).send(body);
    expect(none.status).to.equal(403);
    expect(none.body.error).to.equal('forbidden');
    expect(none.body.message).to.contain('X-CSRF-Token');
    const wrong = await d.http.post('/api/v2/reservations').set('Cookie', s.cookie).set('X-CSRF-Token', 'x' + s.csrf.slice(1)).send(body);
    expect(wrong.status).to.equal(403);
    expect(wrong.body.message).to.contain('does not match');
    const ok = await d.http.post('/api/v2/reservations').set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf).send(body);
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.reservations[0].username).to.equal('alice');
    const id = ok.body.reservations[0].reservation_id as number;
    // Reads need no CSRF token.
    expect((await d.http.get('/api/v2/nodes').set('Cookie', s.cookie)).status).to.equal(200);
    expect((await d.http.delete(`/api/v2/reservations/${id}`).set('Cookie', s.cookie)).status).to.equal(403);
    expect((await d.http.delete(`/api/v2/reservations/${id}`).set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf)).status).to.equal(204);
  });

  it('a cross-site form post is refused: to the sign-in and sign-out forms, and to the API with the cookie', async () => {
    const alice = await asUser(d, 'alice');
    const s = await signIn(d, alice.token);
    const login = await d.http.post('/app/sign-in').set('Origin', 'http://evil.example').type('form').send({ token: alice.token });
    expect(login.status).to.equal(403);
    expect(login.body.error).to.equal('cross_site_request');
    const fetchSite = await d.http.post('/app/sign-in').set('Sec-Fetch-Site', 'cross-site').type('form').send({ token: alice.token });
    expect(fetchSite.status).to.equal(403);
    const out = await d.http.post('/app/sign-out').set('Cookie', s.cookie).set('Origin', 'http://evil.example').type('form').send({ csrf: s.csrf });
    expect(out.status).to.equal(403);
    // A form another site posts carries no custom header: no CSRF token, so refused even if the browser sent the cookie.
    const api = await d.http.post('/api/v2/reservations').set('Cookie', s.cookie).set('Origin', 'http://evil.example').type('form').send({ node_ids: 'farmhand-test', message: 'x' });
    expect(api.status).to.equal(403);
    expect(api.body.message).to.contain('X-CSRF-Token');
    expect((await d.http.get('/api/v2/user').set('Cookie', s.cookie)).status, 'the session still works').to.equal(200);
  });

  it('token-header clients are unchanged: no CSRF token needed, even with a cookie beside the header', async () => {
    const bob = await asUser(d, 'bob');
    const alice = await asUser(d, 'alice');
    const s = await signIn(d, alice.token);
    const made = await bob.post('/api/v2/reservations').set('Cookie', s.cookie).send({ node_ids: ['farmhand-test'], message: 'bob via token' });
    expect(made.status, made.text).to.equal(200);
    expect(made.body.reservations[0].username, 'the header wins over the cookie').to.equal('bob');
    expect((await bob.delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id}`)).status).to.equal(204);
    const noToken = await d.http.get('/api/v2/user');
    expect(noToken.status).to.equal(403);
  });

  it('revoking the token ends its sessions', async () => {
    const carol = await asUser(d, 'carol');
    const s = await signIn(d, carol.token);
    expect((await d.http.get('/api/v2/user').set('Cookie', s.cookie)).status).to.equal(200);
    const id = /^fh_([0-9a-f]{8})_/.exec(carol.token)![1]!;
    expect(await new TokenStore(tokensFile(d.dataDir)).revoke(id)).to.not.equal(undefined);
    const after = await d.http.get('/api/v2/user').set('Cookie', s.cookie);
    expect(after.status).to.equal(403);
    expect(after.body.message).to.contain('sign in again');
    const cleared = ([] as string[]).concat(after.headers['set-cookie'] ?? []);
    expect(cleared.some((c) => /^farmhand_session=;/.test(c)), 'the cookie is cleared').to.equal(true);
  });

  it("one user's sign-ins past SESSIONS_PER_USER end that user's oldest session, never another user's", async () => {
    const frank = await asUser(d, 'frank');
    const grace = await asUser(d, 'grace');
    const theirs = await signIn(d, grace.token);
    const first = await signIn(d, frank.token);
    for (let i = 0; i < SESSIONS_PER_USER; i++) await signIn(d, frank.token);
    expect((await d.http.get('/api/v2/user').set('Cookie', first.cookie)).status, "frank's oldest session is gone").to.equal(403);
    const still = await d.http.get('/api/v2/user').set('Cookie', theirs.cookie);
    expect(still.status, "grace's session still works").to.equal(200);
    expect(still.body.login).to.equal('grace');
  });

  it('sign-out needs the CSRF token, then ends the session', async () => {
    const alice = await asUser(d, 'alice');
    const s = await signIn(d, alice.token);
    const without = await d.http.post('/app/sign-out').set('Cookie', s.cookie).type('form').send({});
    expect(without.status).to.equal(403);
    expect((await d.http.get('/api/v2/user').set('Cookie', s.cookie)).status).to.equal(200);
    const out = await d.http.post('/app/sign-out').set('Cookie', s.cookie).type('form').send({ csrf: s.csrf });
    expect(out.status).to.equal(303);
    expect(out.headers.location).to.equal('/');
    expect((await d.http.get('/api/v2/user').set('Cookie', s.cookie)).status).to.equal(403);
  });
});

describe('portal: pages under auth.v1_requires_token', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon({ config: { auth: { v1_requires_token: true } } });
  });
  after(async () => {
    await d?.stop();
  });

  it('a browser without a session is sent to the sign-in page; API clients get the JSON 403; sign-in and /static stay open', async () => {
    const page = await d.http.get('/').set('Accept', HTML);
    expect(page.status).to.equal(303);
    expect(page.headers.location).to.equal('/app/sign-in?next=%2F');
    const json = await d.http.get('/').set('Accept', 'application/json');
    expect(json.status).to.equal(403);
    expect(json.body.error).to.equal('forbidden');
    expect((await d.http.get('/')).status, 'no Accept: an API client').to.equal(403);
    expect((await d.http.get('/app/sign-in').set('Accept', HTML)).status).to.equal(200);
    expect((await d.http.get('/static/api.js')).status).to.equal(200);
  });

  it('signed in, the front door and /app/events accept the cookie', async () => {
    const alice = await asUser(d, 'alice');
    const s = await signIn(d, alice.token);
    const page = await d.http.get('/').set('Cookie', s.cookie).set('Accept', HTML);
    expect(page.status).to.equal(200);
    expect(page.text).to.contain('Signed in as');
    const refused = await SseClient.open(`${d.url}/app/events`);
    expect(refused.res.statusCode, 'no session: refused').to.equal(403);
    refused.close();
    const stream = await SseClient.open(`${d.url}/app/events`, { Cookie: s.cookie });
    try {
      expect(stream.res.statusCode).to.equal(200);
      const made = await alice.post('/api/v2/reservations').send({ node_ids: ['farmhand-test'], message: 'seen on the stream' });
      expect(made.status).to.equal(200);
      await stream.next((m) => m.event === 'reservation.made' && (m.data.data as { message?: string }).message === 'seen on the stream', 'reservation.made on /app/events');
    } finally {
      stream.close();
    }
  });
});

describe('portal: sign-in under the rate limit', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  before(async () => {
    // A refill slow enough that only the burst counts.
    d = await startTestDaemon({ config: { rate_limit: { requests_per_second: 0.001, burst: 3, artifact_burst: 3 } } });
  });
  after(async () => {
    await d?.stop();
  });

  it('guessing tokens at the sign-in form is rate-limited per address like any unauthenticated request', async () => {
    const guess = () => d.http.post('/app/sign-in').type('form').send({ token: 'fh_00000000_' + 'b'.repeat(43) });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await guess()).status);
    expect(statuses.slice(0, 3)).to.deep.equal([403, 403, 403]);
    expect(statuses.slice(3)).to.deep.equal([429, 429]);
  });
});
