// The OpenAPI document (src/http/openapi) and the suite's contract check (test/helpers/contract.ts):
// the document is valid OpenAPI 3.1 by a real validator, it covers every route the routers mount,
// the checker reports what does not conform, and a mocha run fails the test that got such an answer.
import SwaggerParser from '@apidevtools/swagger-parser';
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { parseRunRequest, type RunTestsBody } from '../../src/core/runRequest.js';
import { endpointOf } from '../../src/http/endpoints/table.js';
import { validateBody } from '../../src/http/endpoints/validate.js';
import { entryOfKey } from '../../src/http/endpoints/mount.js';
import { buildDocument } from '../../src/http/openapi/document.js';
import { apiPage } from '../../src/http/openapi/page.js';
import { OPERATIONS as ENDPOINTS } from '../../src/http/openapi/endpoint.js';
import { V1RunTestsRequest, V2RunTestsRequest } from '../../src/http/openapi/schemas.js';
import { ContractChecker, type SeenResponse } from '../helpers/contract.js';

const doc = buildDocument({ version: '0.0.0-test' });
const job = { job_uid: '/n/ab/1', job_url: 'http://x/api/v2/jobs/n/ab/1', status: 'exited', start_time: 't', end_time: null, result_counts: { pass: 1, fail: 0, error: 0, total: 1 } };
const json = (method: string, path: string, status: number, body: unknown): SeenResponse => ({
  method,
  path,
  status,
  contentType: 'application/json; charset=utf-8',
  body: JSON.stringify(body),
  length: 1,
});

describe('OpenAPI document', () => {
  it('is valid OpenAPI 3.1 by @apidevtools/swagger-parser', async () => {
    const api = await SwaggerParser.validate(structuredClone(doc) as never);
    expect((api as { openapi: string }).openapi).to.equal('3.1.0');
  });

  it('routes are mounted only through the table: no router verb called in src/ but by the mounter, and each literal key has an entry', () => {
    // Every route is mounted by `mount(router, 'METHOD path', ...)` (src/http/endpoints/mount.ts), which throws
    // at start for a key without an entry; a router's own get/post/put/delete would bypass the table.
    const direct: string[] = [];
    let keys = 0;
    const walk = (dir: URL): void => {
      for (const d of readdirSync(dir, { withFileTypes: true })) {
        if (d.isDirectory()) walk(new URL(`${d.name}/`, dir));
        else if (/\.tsx?$/.test(d.name) && !dir.pathname.endsWith('/src/http/endpoints/')) {
          const src = readFileSync(new URL(d.name, dir), 'utf8');
          for (const m of src.matchAll(/\b(r|router|\w+Router)\.(get|post|put|delete|patch|all)\(/g)) direct.push(`${d.name}: ${m[0]}`);
          for (const m of src.matchAll(/\bmount\(\w+, '([A-Z]+ [^']+)'/g)) {
            expect(() => entryOfKey(m[1]!), `${d.name}: ${m[1]}`).to.not.throw();
            keys++;
          }
        }
      }
    };
    walk(new URL('../../src/', import.meta.url));
    expect(direct).to.deep.equal([]);
    expect(keys).to.be.greaterThan(40);
    expect(() => entryOfKey('GET /api/v2/not-in-the-table')).to.throw(/no entry "GET \/api\/v2\/not-in-the-table" in the table of endpoints/);
  });

  it('has a reference page with every path, no script and no external asset', () => {
    const page = apiPage(doc as Parameters<typeof apiPage>[0], ENDPOINTS);
    for (const e of ENDPOINTS) expect(page).to.include(e.path.replace(/&/g, '&amp;'));
    expect(page).not.to.match(/<script|<link|src=|https?:\/\//i);
  });

  it('describes run_tests bodies as the server checks them (the published schemas agree with the route\'s check and the domain\'s tag rules)', () => {
    const base = { test_pack_revision: 'main', test_cases: ['tests/a.py::test_x'] };
    const bodies: unknown[] = [
      base, {}, null, [], 'x', { ...base, test_cases: [] }, { ...base, test_cases: ['nope'] }, { ...base, test_cases: [5] }, { ...base, test_pack_revision: '' },
      { ...base, category: 'a/b' }, { ...base, category: '.x' }, { ...base, category: 'ok cat' }, { ...base, category: '' }, { ...base, category: 'tab\there' }, { ...base, category: null },
      { ...base, soak: 'run forever' }, { ...base, soak: 'sometimes' }, { ...base, shuffle: 'yes' }, { ...base, shuffle: true },
      { ...base, remote_control: '../x' }, { ...base, remote_control: 'vstb' }, { ...base, remote_control: null }, { ...base, extra: 1 },
    ];
    for (const body of bodies) {
      let accepted = true;
      try {
        validateBody(endpointOf('POST', '/api/v1/run_tests')!, body);
        parseRunRequest(body as RunTestsBody, 'v1');
      } catch {
        accepted = false;
      }
      expect(V1RunTestsRequest.safeParse(body).success, JSON.stringify(body)).to.equal(accepted);
    }
    const v2 = { ...base, node_id: 'n' };
    for (const tags of [{ a: 'b' }, { 'a:b': 'c' }, { _x: '1' }, { a: 5 }, [], null, { ' ': 'x' }]) {
      let accepted = true;
      try {
        validateBody(endpointOf('POST', '/api/v2/run_tests')!, { ...v2, tags });
        parseRunRequest({ ...v2, tags }, 'v2');
      } catch {
        accepted = false;
      }
      expect(V2RunTestsRequest.safeParse({ ...v2, tags }).success, JSON.stringify(tags)).to.equal(accepted);
    }
  });
});

describe('contract check (test/helpers/contract.ts)', () => {
  const c = new ContractChecker(doc);

  it('accepts conforming answers: a Job, a 204 without body, an error body, a file, an unknown path 404', () => {
    expect(c.check(json('GET', '/api/v2/jobs/n/ab/1', 200, job))).to.equal(undefined);
    expect(c.check(json('GET', '/API/V1/jobs/n/ab/1/', 200, job))).to.equal(undefined);
    expect(c.check({ method: 'DELETE', path: '/api/v2/reservations/3', status: 204, contentType: undefined, body: undefined, length: 0 })).to.equal(undefined);
    expect(c.check(json('POST', '/api/v1/run_tests', 409, { error: 'conflict', message: 'busy' }))).to.equal(undefined);
    expect(c.check({ method: 'GET', path: '/api/v1/result/n/ab/1/2026-01-01_00.00.00/artifacts/a/b.txt', status: 200, contentType: 'text/plain', body: 'x', length: 1 })).to.equal(undefined);
    expect(c.check(json('GET', '/nope', 404, { error: 'not_found', message: 'no such endpoint' }))).to.equal(undefined);
  });

  it('reports a body that does not match its schema: a missing field, a wrong type, an undocumented field', () => {
    const { result_counts: _, ...noCounts } = job;
    expect(c.check(json('GET', '/api/v2/jobs/n/ab/1', 200, noCounts))).to.match(/GET \/api\/v2\/jobs\/n\/ab\/1 -> 200: body does not match the schema: .*result_counts/);
    expect(c.check(json('GET', '/api/v2/jobs/n/ab/1', 200, { ...job, status: 'done' }))).to.match(/\/status must be equal to one of the allowed values/);
    expect(c.check(json('GET', '/api/v2/jobs/n/ab/1', 200, { ...job, surprise: 1 }))).to.match(/must NOT have additional properties/);
    expect(c.check(json('GET', '/api/v2/user', 403, { error: 'oops', message: 'x' }))).to.match(/\/error must be equal to one of the allowed values/);
  });

  it('reports an undocumented status, a wrong content type, a body where none is documented, a success on an unknown path', () => {
    expect(c.check(json('GET', '/api/v2/user', 418, { error: 'not_found', message: 'x' }))).to.match(/status 418 is not documented for get \/api\/v2\/user/);
    expect(c.check({ method: 'GET', path: '/api/v2/user', status: 200, contentType: 'text/html', body: '<p>', length: 3 })).to.match(/content type "text\/html" is not documented/);
    expect(c.check(json('DELETE', '/api/v2/reservations/3', 204, {}))).to.match(/documented without a body/);
    expect(c.check(json('GET', '/api/v9/things', 200, []))).to.match(/path not documented/);
    expect(c.check(json('POST', '/api/v2/user', 200, { login: 'a' }))).to.match(/method not documented/);
  });

  it('fails the mocha test during which a non-conforming answer arrived, naming path, status and schema error', function () {
    this.timeout(120_000);
    // Its own mocha, with the project's .mocharc.cjs (the root hook), on a fixture that is not part of the suite.
    const run = spawnSync(process.execPath, ['node_modules/mocha/bin/mocha.js', 'test/fixtures/contract-violation.fixture.ts'], { encoding: 'utf8', env: { ...process.env, FORCE_COLOR: '0' } });
    const out = `${run.stdout}${run.stderr}`;
    expect(run.status, out).to.equal(1);
    expect(out).to.include('1 passing').and.include('1 failing');
    expect(out).to.match(/GET \/api\/v2\/user -> 200: body does not match the schema: \/login must be string/);
  });
});
