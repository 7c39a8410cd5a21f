// The auth middleware (authenticate, requireUser, guardApi) in a Koa app built here, against a real tokens file.
import Router from '@koa/router';
import { expect } from 'chai';
import Koa from 'koa';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { authenticate, guardApi, needsToken, requireUser, userOf } from '../../src/http/auth.js';
import { errorHandler } from '../../src/http/errors.js';
import { FileTokenVerifier, TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { capturingLogger, type CapturingLogger } from '../helpers/logger.js';


describe('auth middleware', () => {
  let dir: string;
  let store: TokenStore;
  let token: string;
  let tokenId: string;
  let log: CapturingLogger;

  /** errors -> authenticate -> guardApi -> a v2 and a v1 route, as docs/auth.md says to mount them. */
  function app(v1RequiresToken = false): Koa {
    const a = new Koa();
    a.silent = true;
    const r = new Router();
    r.get('/api/v2/user', (ctx) => {
      ctx.body = { login: userOf(ctx)?.login, tokenId: userOf(ctx)?.tokenId };
    });
    r.get('/api/v2/boom', () => {
      throw new Error('something broke');
    });
    r.get('/api/v1/jobs/:id', (ctx) => {
      ctx.body = { caller: userOf(ctx)?.login ?? null };
    });
    a.use(errorHandler(log));
    a.use(authenticate(new FileTokenVerifier(tokensFile(dir), log)));
    a.use(guardApi({ v1RequiresToken }));
    a.use(r.routes());
    return a;
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-auth-'));
    store = new TokenStore(tokensFile(dir));
    const made = await store.create('alice');
    token = made.token;
    tokenId = made.entry.id;
    log = capturingLogger();
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const forbidden = (res: request.Response) => {
    expect(res.status).to.equal(403);
    expect(res.type).to.equal('application/json');
    expect(res.body.error).to.equal('forbidden');
    expect(res.body.message).to.be.a('string').and.not.include(token);
  };

  it('"Every request carries the header Authorization: token <ACCESS_TOKEN>": a valid token -> the user', async () => {
    const res = await request(app().callback()).get('/api/v2/user').set('Authorization', `token ${token}`).expect(200);
    expect(res.body).to.deep.equal({ login: 'alice', tokenId });
  });

  it('"When the token is missing or invalid, the response is 403": missing header, empty header', async () => {
    const http = request(app().callback());
    forbidden(await http.get('/api/v2/user'));
    forbidden(await http.get('/api/v2/user').set('Authorization', ''));
    expect((await http.get('/api/v2/user')).body.message).to.match(/Authorization: token/);
  });

  it('403 for a wrong scheme (Basic, a bare token), but Bearer and any letter case of "token" are accepted', async () => {
    const http = request(app().callback());
    forbidden(await http.get('/api/v2/user').set('Authorization', `Basic ${Buffer.from(`alice:${token}`).toString('base64')}`));
    forbidden(await http.get('/api/v2/user').set('Authorization', token));
    forbidden(await http.get('/api/v2/user').set('Authorization', `token ${token} extra`));
    for (const scheme of ['Bearer', 'bearer', 'Token', 'TOKEN']) {
      const res = await http.get('/api/v2/user').set('Authorization', `${scheme}  ${token}`);
      expect(res.status, scheme).to.equal(200);
    }
  });

  it('403 for an unknown token and a malformed one', async () => {
    const http = request(app().callback());
    const unknown = `fh_${tokenId === 'ffffffff' ? '00000000' : 'ffffffff'}_${token.slice(12)}`;
    forbidden(await http.get('/api/v2/user').set('Authorization', `token ${unknown}`));
    forbidden(await http.get('/api/v2/user').set('Authorization', `token ${token.slice(0, -1)}`));
  });

  it('"a revoked token is refused on its next request" while the daemon side stays up', async () => {
    const http = request(app().callback());
    await http.get('/api/v2/user').set('Authorization', `token ${token}`).expect(200);
    await store.revoke(tokenId);
    forbidden(await http.get('/api/v2/user').set('Authorization', `token ${token}`));
    // A token created meanwhile works at once.
    const other = await store.create('bob');
    const res = await http.get('/api/v2/user').set('Authorization', `token ${other.token}`).expect(200);
    expect(res.body.login).to.equal('bob');
  });

  it('v1 is open by default (its clients send no credentials), and a token there is still recognised', async () => {
    const http = request(app().callback());
    expect((await http.get('/api/v1/jobs/1').expect(200)).body).to.deep.equal({ caller: null });
    expect((await http.get('/api/v1/jobs/1').set('Authorization', `token ${token}`).expect(200)).body).to.deep.equal({ caller: 'alice' });
  });

  it('auth.v1_requires_token: v1 needs a token too', async () => {
    const http = request(app(true).callback());
    forbidden(await http.get('/api/v1/jobs/1'));
    await http.get('/api/v1/jobs/1').set('Authorization', `token ${token}`).expect(200);
  });

  it('the guard cannot be dodged by letter case or encoding: the router matches /API/V2/user case-insensitively', async () => {
    const http = request(app().callback());
    for (const p of ['/API/V2/user', '/Api/v2/User', '/api//v2/user', '/api/v2/%75ser']) forbidden(await http.get(p));
    expect(needsToken('/api/v1/jobs/1', { v1RequiresToken: false })).to.equal(false);
    expect(needsToken('/API/V1/jobs/1', { v1RequiresToken: true })).to.equal(true);
    expect(needsToken('/github/post-receive', { v1RequiresToken: true })).to.equal(false);
  });

  it('requireUser alone, mounted on one router, guards only that router', async () => {
    const a = new Koa();
    a.silent = true;
    const guarded = new Router({ prefix: '/api/v2' });
    guarded.use(requireUser());
    guarded.get('/user', (ctx) => (ctx.body = { login: userOf(ctx)!.login }));
    const open = new Router();
    open.get('/api/v1/x', (ctx) => (ctx.body = { ok: true }));
    a.use(errorHandler(log)).use(authenticate(new FileTokenVerifier(tokensFile(dir), log)));
    a.use(guarded.routes()).use(open.routes());
    const http = request(a.callback());
    forbidden(await http.get('/api/v2/user'));
    await http.get('/api/v2/user').set('Authorization', `Bearer ${token}`).expect(200, { login: 'alice' });
    await http.get('/api/v1/x').expect(200);
  });

  it('tokens never appear in logs, even when a request with one fails with a 500 or is refused', async () => {
    const http = request(app().callback());
    await http.get('/api/v2/boom').set('Authorization', `token ${token}`).expect(500);
    forbidden(await http.get('/api/v2/user').set('Authorization', `token ${token.slice(0, -2)}xx`));
    await store.revoke(tokenId);
    forbidden(await http.get('/api/v2/user').set('Authorization', `token ${token}`));
    expect(log.entries.length).to.be.greaterThan(0); // the 500 was logged
    expect(log.text()).not.to.include(token.slice(12)); // no secret, whole or in part
    expect(log.text()).not.to.match(/authorization/i);
  });
});
