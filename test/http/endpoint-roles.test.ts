// The table of endpoints (src/http/endpoints/table.ts) against a real node daemon and a real portal (its
// throwaway PostgreSQL): every route mounted on either app has an entry, and every entry's role is enforced:
// for each mounted route and each role, a request with a token of that role gets 403 `forbidden` ("<role> may
// not ...") when the role is below the entry's, and anything but 403 when it is at or above. Also: a node with
// no roles works as before; a role change applies at once to an existing token and session; a user without a
// role on a node with roles may only read; the portal's delegation to a node is not held to the node's roles.
import { expect } from 'chai';
import request from 'supertest';
import { request as httpRequest } from 'node:http';
import { ROLES, permits, type Role } from '../../src/core/roles.js';
import { mountedRoutes } from '../../src/http/endpoints/authorize.js';
import { ENDPOINTS, endpointOf, type Endpoint } from '../../src/http/endpoints/table.js';
import { PgUsers } from '../../src/farm/users.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { runCli } from '../../src/cli/program.js';
import { runCaptured, type CliEntry } from '../helpers/cli.js';
import type { TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

interface Answer {
  status: number;
  json: Record<string, unknown>;
}

/**
 * One request; the answer's body is read only for a 403 (its error code and message), else the connection is
 * dropped once the status line is in: long polls, the event stream and the live picture never end by themselves.
 */
function call(base: string, method: string, path: string, token: string | undefined, body?: string): Promise<Answer> {
  const u = new URL(base);
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (token) headers.Authorization = `token ${token}`;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = String(Buffer.byteLength(body));
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
      const status = res.statusCode ?? 0;
      if (status !== 403) {
        res.destroy();
        req.destroy();
        resolve({ status, json: {} });
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        } catch {
          /* not JSON: the assertion says so */
        }
        resolve({ status, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A concrete path for a route pattern: parameters filled with values that reach the handler (which may answer 4xx/5xx). */
function concrete(pattern: string, nodeId: string): string {
  return pattern
    .replace(':node_id', nodeId)
    .replace(':node', nodeId)
    .replace(':hex', '0000000a')
    .replace(':num', '1')
    .replace(':stamp', '2026-01-01_00.00.00')
    .replace(':id', '424242')
    .replace(':file', 'app.css')
    .replace(/\*\w+/, 'x');
}

const unsafe = (m: string) => m !== 'GET';

/** Each distinct (method, pattern) mounted on the app, HEAD folded into GET. */
function routesOf(app: Parameters<typeof mountedRoutes>[0]): { method: string; path: string }[] {
  const seen = new Map<string, { method: string; path: string }>();
  for (const r of mountedRoutes(app)) seen.set(`${r.method} ${r.path}`, r);
  return [...seen.values()];
}

/** For every mounted route and every role: 403 below the entry's role, not 403 at or above it. */
async function checkEveryRoute(base: string, routes: { method: string; path: string }[], tokens: Record<Role, string>, nodeId: string): Promise<number> {
  let checked = 0;
  for (const r of routes) {
    const e = endpointOf(r.method, r.path) as Endpoint;
    // The nodes' upload API is authenticated by node credentials, never by a person's token or role.
    if (e.role === 'node') continue;
    for (const role of ROLES) {
      const path = concrete(r.path, nodeId);
      const a = await call(base, r.method, path, tokens[role], unsafe(r.method) ? '{}' : undefined);
      const what = `${role} ${r.method} ${path} (entry ${e.role})`;
      if (e.role !== 'public' && !permits(role, e.role)) {
        expect(a.status, what).to.equal(403);
        expect(a.json.error, what).to.equal('forbidden');
        expect(String(a.json.message), what).to.match(new RegExp(`^${role} may not ${e.action}`));
      } else {
        expect(a.status, `${what}: ${JSON.stringify(a.json)}`).to.not.equal(403);
      }
      checked++;
    }
  }
  return checked;
}

describe('roles: the table of endpoints, enforced on a node and on the portal', function () {
  this.timeout(240_000);
  let d: TestDaemon;
  let farm: TestFarm;
  const nodeTokens = {} as Record<Role, string>;
  const portalTokens = {} as Record<Role, string>;

  before(async () => {
    // One portal, and one node joined to it: its own routes are called directly, and the portal's forward to it.
    farm = await startTestFarm();
    d = await farm.addNode('roles-node', { config: { capture: { uri: 'none:' } } });
  });
  after(async () => {
    await farm?.stop();
  });

  it('every route mounted on the node and on the portal has an entry in the table, served where the entry says', () => {
    const missing: string[] = [];
    const misplaced: string[] = [];
    const unchecked: string[] = [];
    for (const [where, app] of [['node', d.daemon.app], ['portal', farm.portal.app]] as const) {
      // Every route was there when the app ran authorizeRoutes (none mounted after it, unchecked).
      unchecked.push(...mountedRoutes(app).filter((r) => !r.checked).map((r) => `${where}: ${r.method} ${r.path}`));
      for (const r of routesOf(app)) {
        const e = endpointOf(r.method, r.path);
        if (!e) missing.push(`${where}: ${r.method} ${r.path}`);
        else if (e.served !== 'both' && e.served !== where) misplaced.push(`${where}: ${r.method} ${r.path} (entry says ${e.served})`);
      }
    }
    expect(missing, 'mounted routes missing from src/http/endpoints/table.ts').to.deep.equal([]);
    expect(misplaced).to.deep.equal([]);
    expect(unchecked, 'routes mounted after authorizeRoutes ran').to.deep.equal([]);
    // And the table names no method+path twice.
    const keys = ENDPOINTS.map((e) => `${e.method} ${e.path}`);
    expect(keys.length).to.equal(new Set(keys).size);
  });

  it('every entry served by the node is mounted on the node, and every entry served by the portal on the portal (and nothing else is)', () => {
    const unmounted: string[] = [];
    for (const [where, app] of [['node', d.daemon.app], ['portal', farm.portal.app]] as const) {
      const mounted = new Set(routesOf(app).map((r) => `${r.method} ${r.path}`));
      for (const e of ENDPOINTS) {
        // OIDC sign-in is mounted only with an `[oidc]` section (test/web/oidc*.test.ts mount it).
        if ((e.served !== 'both' && e.served !== where) || e.mountedWhen === 'oidc') continue;
        if (!mounted.has(`${e.method} ${e.path}`)) unmounted.push(`${where}: ${e.method} ${e.path}`);
      }
    }
    expect(unmounted, 'entries not mounted where they say they are served').to.deep.equal([]);
  });

  it('a node with no roles configured works as before: a signed-in user may do everything, tokens without roles in the file', async () => {
    const store = new TokenStore(tokensFile(d.dataDir));
    const { token } = await store.create('legacy');
    const c = await store.read();
    expect(c.roles).to.deep.equal({});
    // Every route a role check could refuse: none refuses this user (no role = no restriction).
    for (const r of routesOf(d.daemon.app)) {
      const e = endpointOf(r.method, r.path)!;
      if (e.role === 'public' || e.role === 'read') continue;
      const a = await call(d.url, r.method, concrete(r.path, d.config.node_id), token, unsafe(r.method) ? '{}' : undefined);
      expect(a.status, `${r.method} ${r.path}: ${JSON.stringify(a.json)}`).to.not.equal(403);
    }
  });

  it('on a node: each route refuses the roles below its entry with 403 forbidden, and serves the others', async () => {
    const store = new TokenStore(tokensFile(d.dataDir));
    for (const role of ROLES) nodeTokens[role] = (await store.create(`node-${role}`, { role })).token;
    const n = await checkEveryRoute(d.url, routesOf(d.daemon.app), nodeTokens, d.config.node_id);
    expect(n).to.be.greaterThan(200);
  });

  it('on a node with roles, a user without one may only read; `farmhand user role` changes an existing token\'s role at once', async () => {
    // `legacy` was made before any role existed: now that roles are in force it may read, not run.
    const store = new TokenStore(tokensFile(d.dataDir));
    const { token } = await store.create('changer');
    const runTests = () => call(d.url, 'POST', '/api/v2/run_tests', token, '{}');
    const denied = await runTests();
    expect(denied.status).to.equal(403);
    expect(denied.json.message).to.match(/^read may not run tests/);
    expect((await call(d.url, 'GET', '/api/v2/results', token)).status).to.equal(200);

    const farmhand: CliEntry = (argv, out, err) => runCli(argv, { out, err }, { serve: () => Promise.reject(new Error('not here')) });
    const cli = await runCaptured(farmhand, ['user', 'role', 'changer', 'run', '--data-dir', d.dataDir]);
    expect(cli.code, cli.err).to.equal(0);
    expect(cli.out).to.match(/changer: read -> run/);
    // The very next request with the same token: run_tests is reached (400: the empty body), no 403.
    expect((await runTests()).status).to.equal(400);

    await store.setRole('changer', 'manual');
    const again = await runTests();
    expect(again.status).to.equal(403);
    expect(again.json.message).to.match(/^manual may not run tests/);
  });

  it('on a node, a signed-in session follows its user\'s role at once too (sign in as manual: live view; lowered to read: 403)', async () => {
    const store = new TokenStore(tokensFile(d.dataDir));
    const { token } = await store.create('viewer', { role: 'manual' });
    const signIn = await request(d.url).post('/app/sign-in').type('form').send({ token, next: '/' });
    expect(signIn.status).to.equal(303);
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    const live = () => request(d.url).get('/app/live').set('Cookie', cookie).set('Accept', 'application/json');
    expect((await live()).status).to.equal(200);
    await store.setRole('viewer', 'read');
    const denied = await live();
    expect(denied.status).to.equal(403);
    expect(denied.body).to.include({ error: 'forbidden' });
    expect(denied.body.message).to.match(/^read may not use the live view/);
  });

  it('on the portal: each route refuses the roles below its entry with 403 forbidden, and serves the others', async () => {
    const users = new PgUsers(farm.db);
    for (const role of ROLES) {
      await users.add(`portal-${role}`, role);
      portalTokens[role] = await farm.tokenFor(`portal-${role}`);
    }
    // The node's id: the node-scoped routes are forwarded to it (the node answers for the portal's user).
    const n = await checkEveryRoute(farm.url, routesOf(farm.portal.app), portalTokens, d.config.node_id);
    expect(n).to.be.greaterThan(150);
  });

  it('the node serves a portal user the portal let through, whatever the node\'s own roles (the portal decides)', async () => {
    // The node has roles (node-* users); portal-manual is unknown to it, so its own token there would be read only.
    expect(Object.keys((await new TokenStore(tokensFile(d.dataDir)).read()).roles)).to.include('node-admin');
    const press = await call(farm.url, 'POST', `/api/v2/nodes/${d.config.node_id}/press`, portalTokens.manual, JSON.stringify({ key: 'KEY_OK' }));
    expect(press.status, JSON.stringify(press.json)).to.not.equal(403);
    // And the portal refuses what the role does not allow before anything reaches the node.
    const denied = await call(farm.url, 'POST', `/api/v2/nodes/${d.config.node_id}/press`, portalTokens.read, JSON.stringify({ key: 'KEY_OK' }));
    expect(denied.status).to.equal(403);
    expect(denied.json.message).to.match(/^read may not press keys/);
  });

  it('on the portal: a role change applies to an existing token without a restart (NOTIFY), and a new user gets run', async () => {
    const users = new PgUsers(farm.db);
    const added = await users.add('farm-changer');
    expect(added.role).to.equal('run');
    const token = await farm.tokenFor('farm-changer');
    const reserve = () => call(farm.url, 'POST', '/api/v2/reservations', token, '{}');
    expect((await reserve()).status).to.equal(400);
    await users.setRole('farm-changer', 'read');
    const denied = await waitFor(async () => {
      const a = await reserve();
      return a.status === 403 ? a : undefined;
    }, { what: 'the portal to see the new role', timeoutMs: 30_000 });
    expect(denied.json.error).to.equal('forbidden');
    expect(denied.json.message).to.match(/^read may not reserve nodes/);
  });
});
