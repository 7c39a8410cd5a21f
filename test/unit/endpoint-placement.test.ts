// The table of endpoints drives the farm portal's placement (src/http/endpoints/place.ts): which requests are for one
// node, where the node id is, how the portal answers them; the portal's router mounts every such entry once
// (src/farm/portal/routes.ts), and an entry added to the table is placed without any other edit, wherever it sits.
import Koa from 'koa';
import { expect } from 'chai';
import { e, type Endpoint } from '../../src/http/endpoints/entry.js';
import { farmEndpoints, farmPlacements, Placements } from '../../src/http/endpoints/place.js';
import { ENDPOINTS, endpointKey } from '../../src/http/endpoints/table.js';
import { mountedRoutes } from '../../src/http/endpoints/authorize.js';
import { checksOf, validateRequest } from '../../src/http/endpoints/validate.js';
import { FarmError } from '../../src/core/errors.js';
import { portalRouter, type PortalRouteDeps } from '../../src/farm/portal/routes.js';

/** A concrete path of a pattern: the node id where the entry says it is, `x` for the other parameters. */
const pathOf = (pattern: string, nodeParam: string, node: string): string =>
  pattern.replace(/:(\w+)|\*(\w+)/g, (_m, name?: string, rest?: string) => (name === nodeParam ? encodeURIComponent(node) : rest ? 'a/b.txt' : 'x'));

describe('the table of endpoints places the farm portal`s node-scoped requests', () => {
  it('every node-scoped entry a portal serves says where its node id is, and a request of it resolves that id from its path', () => {
    const farm = farmEndpoints();
    expect(farm.length).to.be.greaterThan(20);
    for (const x of farm) {
      if (x.farm.id.startsWith('body.')) continue;
      expect(x.path, `${x.method} ${x.path}`).to.include(`:${x.farm.id}`);
      const placed = farmPlacements().place(x.method, pathOf(x.path, x.farm.id, 'nœud 7'));
      expect(placed?.nodeId, `${x.method} ${x.path}`).to.equal('nœud 7');
      expect(placed!.entry.path, 'the most specific entry of the path').to.equal(x.path);
    }
  });

  it('the answers: a node`s status is the portal`s own, the long polls are held, run_tests names its node in the body', () => {
    const p = farmPlacements();
    expect(p.place('GET', '/api/v2/nodes/n1')?.entry.farm.answer).to.equal('itself');
    expect(p.place('HEAD', '/api/v2/nodes/n1/screenshot.png')?.entry.farm.answer).to.equal('forward');
    expect(p.place('GET', '/api/v2/jobs/n1/ab/3/await_completion')?.entry.farm.answer).to.equal('held');
    expect(p.place('GET', '/api/v2/nodes/n1/job/await_completion')?.entry.farm.answer).to.equal('held');
    const run = p.place('POST', '/api/v2/run_tests', () => ({ node_id: 'n2', test_cases: [] }));
    expect(run?.nodeId).to.equal('n2');
    expect(run?.entry.farm).to.include({ reserved: 'run tests', job: 'whole' });
    expect(p.place('POST', '/api/v2/run_tests', () => ({}))?.nodeId).to.equal(undefined);
    // The farm's own: lists, reservations, the nodes' upload API, a bad escape in the id.
    for (const [m, path] of [
      ['GET', '/api/v2/results'],
      ['GET', '/api/v2/nodes'],
      ['POST', '/api/v2/reservations'],
      ['GET', '/app/results/row'],
      ['PUT', '/farm/v1/results/n1/ab/3/2026-01-01_00.00.00/record'],
    ] as const) {
      expect(p.place(m, path), `${m} ${path}`).to.equal(undefined);
    }
    expect(p.place('GET', '/api/v2/nodes/%E0%A4%A/job')?.nodeId).to.equal(undefined);
  });

  it('an entry added to the table is placed with no other edit, and the table`s order changes nothing', () => {
    const reboot: Endpoint = { ...e('POST', '/api/v2/nodes/:node_id/reboot', 'admin', 'reboot devices'), summary: 'x', tag: 'extras', auth: 'token', responses: {} };
    expect(reboot.farm).to.deep.equal({ id: 'node_id', answer: 'forward' });
    expect(new Placements(ENDPOINTS).place('POST', '/api/v2/nodes/n3/reboot')).to.equal(undefined);
    for (const entries of [[...ENDPOINTS, reboot], [reboot, ...ENDPOINTS].reverse()]) {
      const p = new Placements(entries);
      expect(p.place('POST', '/api/v2/nodes/n3/reboot')?.entry).to.equal(reboot);
      expect(p.place('POST', '/api/v2/nodes/n3/reboot')?.nodeId).to.equal('n3');
      // A wildcard entry never takes a path from a more specific one, whichever comes first.
      expect(p.place('GET', '/api/v2/results/n3/ab/3/2026-01-01_00.00.00/screenshot.png')?.entry.path).to.equal('/api/v2/results/:node/:hex/:num/:stamp/screenshot.png');
      expect(p.place('GET', '/api/v2/results/n3/ab/3/2026-01-01_00.00.00/video.mp4')?.entry.path).to.equal('/api/v2/results/:node/:hex/:num/:stamp/*rest');
    }
    // Served by the nodes alone, or the nodes' own API: not placed.
    expect(new Placements([{ ...reboot, served: 'node' }]).place('POST', '/api/v2/nodes/n3/reboot')).to.equal(undefined);
    expect(e('PUT', '/farm/v1/results/:node/x', 'node', 'upload results', 'portal').farm).to.equal(undefined);
  });

  it("the portal's router mounts every farm entry once, from the table, and nothing the table does not have", () => {
    const deps = { pool: {}, hub: {}, jobs: {} } as unknown as PortalRouteDeps;
    const app = new Koa();
    app.use(portalRouter(deps).routes());
    const mounted = mountedRoutes(app).map((r) => endpointKey(r.method, r.path));
    for (const x of farmEndpoints()) expect(mounted.filter((k) => k === endpointKey(x.method, x.path)), `${x.method} ${x.path}`).to.have.length(1);
    const table = new Set(ENDPOINTS.map((x) => endpointKey(x.method, x.path)));
    expect(mounted.filter((k) => !table.has(k))).to.deep.equal([]);
  });

  it('every documented body and query is checked by the table, on each side that answers it itself', () => {
    for (const x of ENDPOINTS) {
      if (x.body) expect(x.check?.body, `${x.method} ${x.path}: body`).to.not.equal(undefined);
      if (x.query && x.served !== 'portal') expect(x.check?.query, `${x.method} ${x.path}: query`).to.not.equal(undefined);
      // The portal checks what it answers itself; what it forwards, the node checks.
      if (x.query && x.served !== 'node' && x.farm?.answer !== 'forward') expect(x.portalCheck?.query, `${x.method} ${x.path}: portal query`).to.not.equal(undefined);
    }
    const entry = (key: string) => ENDPOINTS.find((x) => `${x.method} ${x.path}` === key)!;
    const refused = (key: string, req: Parameters<typeof validateRequest>[1], side: 'node' | 'portal' = 'node'): string => {
      try {
        validateRequest(checksOf(entry(key), side), req);
      } catch (err) {
        expect(err).to.be.instanceOf(FarmError);
        return `${(err as FarmError).code}: ${(err as Error).message}`;
      }
      return 'accepted';
    };
    const maintenance = 'POST /api/v2/nodes/:node_id/maintenance';
    expect(refused(maintenance, { body: { on: true, message: 'rewiring until 15:00' } })).to.equal('accepted');
    expect(refused(maintenance, { body: { on: true } })).to.match(/^invalid_request: message is required to put a node in maintenance/);
    expect(refused(maintenance, { body: { on: false, colour: 1 } })).to.match(/^invalid_request: unknown field "colour"/);
    expect(refused('GET /api/v2/audit', { query: { user: ['a', 'b'] } }, 'portal')).to.equal('invalid_filter: user must be given once in the query string');
    expect(refused('GET /app/results/row', { query: { filter: 'result:pass' } })).to.equal('invalid_request: result_id is required in the query string');
    expect(refused('GET /app/results/row', { query: { result_id: '/n/ab/1/2026-01-01_00.00.00' } })).to.equal('accepted');
    expect(refused('GET /app/nodes/:node_id/live/frame.png', { query: { x: '1', y: ['2', '3'] } })).to.equal('invalid_request: y must be given once in the query string');
  });
});
