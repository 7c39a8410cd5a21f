// Roles in-process: the tokens file with and without `roles` (old files read as before), the check that
// authorizeRoutes binds to each route (fail closed for a route the table does not know, nothing checked without
// a role or without a credential), the OpenAPI document's x-farmhand-role, and docs/auth.md's table.
import Router from '@koa/router';
import { expect } from 'chai';
import Koa from 'koa';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { authenticate, guardApi } from '../../src/http/auth.js';
import { authorizeRoutes, bindEndpoints, mountedRoutes } from '../../src/http/endpoints/authorize.js';
import { jsonBody } from '../../src/http/body.js';
import { mount } from '../../src/http/endpoints/mount.js';
import { endpointsMarkdown } from '../../src/http/endpoints/doc.js';
import { ENDPOINTS, endpointOfOperation, isDocumented } from '../../src/http/endpoints/table.js';
import { auditRouteOf } from '../../src/http/auditActions.js';
import { OPERATIONS, openApiPath } from '../../src/http/openapi/endpoint.js';
import { errorHandler } from '../../src/http/errors.js';
import { buildDocument } from '../../src/http/openapi/document.js';
import { FileTokenVerifier, parseTokensFileContent, TokenFileError, TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { capturingLogger } from '../helpers/logger.js';

describe('roles: the tokens file, the per-route check, the OpenAPI document and the doc', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-roles-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads a tokens file written before roles (no roles: undefined role), and one with roles', async () => {
    const old = JSON.stringify({ version: 1, tokens: [{ id: '1a2b3c4d', user: 'jenkins', created: '2026-03-04T05:06:07.000Z', hash: 'a'.repeat(64) }] });
    expect(parseTokensFileContent(old)).to.deep.equal({ tokens: JSON.parse(old).tokens, roles: {} });
    const withRoles = JSON.stringify({ ...JSON.parse(old), roles: { jenkins: 'run' } });
    expect(parseTokensFileContent(withRoles).roles).to.deep.equal({ jenkins: 'run' });
    expect(() => parseTokensFileContent(JSON.stringify({ ...JSON.parse(old), roles: { jenkins: 'root' } }))).to.throw(TokenFileError, /roles/);
  });

  it('the verifier answers each user\'s role as the file says now: none without roles, read for an unlisted user, a change at once', async () => {
    const file = tokensFile(dir);
    const store = new TokenStore(file);
    const v = new FileTokenVerifier(file, capturingLogger());
    const a = (await store.create('alice')).token;
    const b = (await store.create('bob')).token;
    expect(v.verify(a)).to.not.have.property('role');
    await store.setRole('alice', 'admin');
    expect(v.verify(a)?.role).to.equal('admin');
    expect(v.verify(b)?.role).to.equal('read');
    await store.setRole('alice', 'manual');
    expect(v.verify(a)?.role).to.equal('manual');
    // Removing the last role: no roles configured again, nobody restricted.
    await store.setRole('alice', undefined);
    expect(v.verify(a)).to.not.have.property('role');
    expect(JSON.parse(readFileSync(file, 'utf8'))).to.not.have.property('roles');
    // An unusable roles entry fails closed: every token refused.
    const text = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    await writeFile(file, JSON.stringify({ ...text, roles: { alice: 'superuser' } }));
    expect(v.verify(a)).to.equal(undefined);
  });

  /** errors -> authenticate -> guardApi -> routes (one of them not in the table), then authorizeRoutes, as the apps do. */
  async function app(v1RequiresToken: boolean): Promise<{ app: Koa; tokens: Record<string, string> }> {
    const store = new TokenStore(tokensFile(dir));
    const tokens = {
      reader: (await store.create('reader', { role: 'read' })).token,
      runner: (await store.create('runner', { role: 'run' })).token,
      boss: (await store.create('boss', { role: 'admin' })).token,
    };
    const a = new Koa();
    a.silent = true;
    const r = new Router();
    r.post('/api/v1/run_tests', (ctx) => {
      ctx.status = 204;
    });
    r.get('/api/v1/results', (ctx) => {
      ctx.body = [];
    });
    r.get('/healthz', (ctx) => {
      ctx.body = { status: 'ok' };
    });
    r.get('/api/v1/not-in-the-table', (ctx) => {
      ctx.status = 204;
    });
    a.use(errorHandler(capturingLogger()));
    a.use(authenticate(new FileTokenVerifier(tokensFile(dir), capturingLogger())));
    a.use(guardApi({ v1RequiresToken }));
    a.use(r.routes());
    a.use(r.allowedMethods());
    expect(authorizeRoutes(a)).to.deep.equal([{ method: 'GET', path: '/api/v1/not-in-the-table' }]);
    // A second call changes nothing (each route is checked once).
    expect(authorizeRoutes(a)).to.deep.equal([]);
    expect(mountedRoutes(a)).to.deep.include({ method: 'POST', path: '/api/v1/run_tests', checked: true });
    return { app: a, tokens };
  }

  it('each route checks its entry\'s role; a route missing from the table needs admin; public routes check nothing', async () => {
    const { app: a, tokens } = await app(false);
    const as = (t: string) => ({ Authorization: `token ${t}` });
    const denied = await request(a.callback()).post('/api/v1/run_tests').set(as(tokens.reader!));
    expect(denied.status).to.equal(403);
    expect(denied.body).to.deep.equal({
      error: 'forbidden',
      message: "read may not run tests: this needs the role run or above; ask an administrator to change the user's role",
    });
    expect((await request(a.callback()).post('/api/v1/run_tests').set(as(tokens.runner!))).status).to.equal(204);
    expect((await request(a.callback()).head('/api/v1/results').set(as(tokens.reader!))).status).to.equal(200);
    expect((await request(a.callback()).get('/healthz').set(as(tokens.reader!))).status).to.equal(200);
    const unlisted = await request(a.callback()).get('/api/v1/not-in-the-table').set(as(tokens.runner!));
    expect(unlisted.status).to.equal(403);
    expect(unlisted.body.message).to.match(/^run may not call GET \/api\/v1\/not-in-the-table \(a route missing from the table/);
    expect((await request(a.callback()).get('/api/v1/not-in-the-table').set(as(tokens.boss!))).status).to.equal(204);
  });

  it('a caller without a credential is held to the token rule, not to roles (v1 open: as before; v1 closed: 403 for the token)', async () => {
    const open = await app(false);
    expect((await request(open.app.callback()).post('/api/v1/run_tests')).status).to.equal(204);
    const closed = await app(true);
    const res = await request(closed.app.callback()).post('/api/v1/run_tests');
    expect(res.status).to.equal(403);
    expect(res.body.message).to.match(/needs an access token/);
  });

  it('every operation of the OpenAPI document carries its role from the table as x-farmhand-role', () => {
    const doc = buildDocument({ version: 'test' }) as { paths: Record<string, Record<string, Record<string, unknown>>> };
    let n = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const e = endpointOfOperation(method, path);
        expect(e, `${method} ${path} has no entry in the table`).to.not.equal(undefined);
        expect(op['x-farmhand-role'], `${method} ${path}`).to.equal(e!.role);
        n++;
      }
    }
    expect(n).to.be.greaterThan(40);
    expect(doc.paths['/api/v2/run_tests']!.post!['x-farmhand-role']).to.equal('run');
  });

  it('docs/auth.md holds the table of endpoints as generated from the table', () => {
    const doc = readFileSync(new URL('../../docs/auth.md', import.meta.url), 'utf8');
    const expected = endpointsMarkdown();
    expect(doc.includes(expected), `docs/auth.md must contain, between its markers, exactly:\n${expected}`).to.equal(true);
  });

  it('the audit trail records what the table says: each entry with `audit` as that action, no other route', () => {
    const concrete = (p: string) => p.replace(/:\w+/g, (m) => (m === ':num' ? '7' : `x-${m.slice(1)}`)).replace(/\*\w+/g, 'a/b');
    const audited = ENDPOINTS.filter((x) => x.audit);
    expect(audited.map((x) => `${x.method} ${x.path}`)).to.include.members(['POST /api/v2/run_tests', 'DELETE /api/v2/reservations/:id', 'POST /api/v2/nodes/:node_id/press', 'POST /github/post-receive']);
    for (const x of ENDPOINTS) {
      const hit = auditRouteOf(x.method, concrete(x.path));
      if (x.audit) expect(hit?.action, `${x.method} ${x.path}`).to.equal(x.audit);
      else expect(hit, `${x.method} ${x.path}`).to.equal(undefined);
    }
    expect(auditRouteOf('POST', '/api/v2/reservations/12/interrupt')?.params).to.deep.equal({ id: '12' });
  });

  it('the OpenAPI operations are the entries with a summary, each path parameter named by the entry\'s params', () => {
    expect(OPERATIONS.length).to.equal(ENDPOINTS.filter(isDocumented).length);
    // The routes the document leaves out: the portal's fallbacks to a node, its session probe, the nodes' upload API.
    const left = ENDPOINTS.filter((x) => !isDocumented(x)).map((x) => x.path);
    for (const p of left) expect(p, p).to.match(/\*rest$|^\/app\/session$|^\/farm\/v1\//);
    expect(openApiPath({ method: 'POST', path: '/api/v2/reservations/:id/extend', params: { reservation_id: 'id' } })).to.equal('/api/v2/reservations/{reservation_id}/extend');
    expect(() => openApiPath({ method: 'GET', path: '/a/:x/:y', params: { x: 'x' } })).to.throw(/more path parameters/);
    expect(() => openApiPath({ method: 'GET', path: '/a/:x', params: { x: 'x', y: 'y' } })).to.throw(/2 params for 1/);
  });

  it('bindEndpoints puts the entry\'s request check behind the role check: 403 for a role too low, then 400 with the check\'s message, then the handler', async () => {
    const store = new TokenStore(tokensFile(dir));
    const reader = (await store.create('reader', { role: 'read' })).token;
    const runner = (await store.create('runner', { role: 'run' })).token;
    const build = (validate: 'node' | undefined) => {
      const a = new Koa();
      a.silent = true;
      const r = new Router();
      r.post('/api/v1/run_tests', (ctx) => {
        ctx.status = 204;
      });
      a.use(errorHandler(capturingLogger()));
      a.use(authenticate(new FileTokenVerifier(tokensFile(dir), capturingLogger())));
      a.use(jsonBody(1024));
      a.use(r.routes());
      bindEndpoints(a, { validate });
      return a.callback();
    };
    const post = (app: ReturnType<typeof build>, token: string, body: unknown) =>
      request(app).post('/api/v1/run_tests').set('Authorization', `token ${token}`).set('Content-Type', 'application/json').send(JSON.stringify(body));
    const app = build('node');
    expect((await post(app, reader, {})).status).to.equal(403);
    const bad = await post(app, runner, { test_pack_revision: 'main', test_cases: ['nope'] });
    expect(bad.status).to.equal(400);
    expect(bad.body).to.deep.equal({ error: 'invalid_request', message: 'test_cases: "nope" is not a test case name of the form <file>::<function>' });
    expect((await post(app, runner, { test_pack_revision: 'main', test_cases: ['a.py::t'] })).status).to.equal(204);
    // Without validation bound (the portal), the handler gets the body as it came.
    expect((await post(build(undefined), runner, { test_cases: ['nope'] })).status).to.equal(204);
  });

  it('mount: a route by its key in the table, a router\'s prefix included; a key with no entry throws when the router is built', async () => {
    const r = new Router();
    expect(() => mount(r, 'GET /api/v2/not-in-the-table', () => undefined)).to.throw(/no entry "GET \/api\/v2\/not-in-the-table" in the table of endpoints/);
    expect(() => mount(r, 'PATCH /api/v2/user', () => undefined)).to.throw(/no entry/);
    expect(() => mount(r, ['GET /api/v2/events', 'POST /api/v2/run_tests'], () => undefined)).to.throw(/mixes methods/);
    mount(r, 'GET /api/v2/user', (ctx) => {
      ctx.body = { login: 'x' };
    });
    const up = new Router({ prefix: '/farm/v1/results' });
    mount(up, 'PUT /farm/v1/results/:node/:hex/:num/:stamp/record', (ctx) => {
      ctx.status = 204;
    });
    expect(() => mount(up, 'GET /api/v2/user', () => undefined)).to.throw(/outside the router's prefix/);
    const a = new Koa();
    a.use(r.routes()).use(up.routes());
    expect(mountedRoutes(a).map((x) => `${x.method} ${x.path}`)).to.deep.equal(['GET /api/v2/user', 'PUT /farm/v1/results/:node/:hex/:num/:stamp/record']);
    expect((await request(a.callback()).head('/api/v2/user')).status).to.equal(200);
    expect((await request(a.callback()).put('/farm/v1/results/n/ab/1/s/record')).status).to.equal(204);
  });
});
