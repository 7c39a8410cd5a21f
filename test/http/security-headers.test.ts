/**
 * The security headers of every kind of answer, in one table: a node's pages,
 * its v1 and v2 API answers (and their errors), static files, the live
 * stream and the event streams, result files and artifacts; then the farm
 * portal's own pages and answers, and the artifacts it serves from its
 * storage once a node uploaded them. The rules (src/http/securityHeaders.ts,
 * docs/portal.md "Security headers"):
 *
 * - every answer: `X-Content-Type-Options: nosniff`, `Referrer-Policy: same-origin`, `X-Frame-Options: DENY`;
 * - a page: its own CSP, scripts from `/static/` only, `frame-ancestors 'none'`;
 * - a file of a result (artifact, log, screenshot): the artifact sandbox;
 * - every other answer (JSON, CSV, XML, text, streams, errors): `default-src 'none'; frame-ancestors 'none'; sandbox`.
 *
 * Forwarded answers of a node seen through the portal (`/app/results/...`, `/app/nodes/<id>/live`) are
 * the portal-forwarding piece's to assert (src/farm/portal/routes.ts); they are not in this table.
 */
import { expect } from 'chai';
import { HOSTILE_CASE, HOSTILE_TEST } from '../fixtures/hostileArtifactPack.js';
import { asUser } from '../helpers/auth.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { ARTIFACT_CSP, DEFAULT_CSP } from '../../src/http/securityHeaders.js';
import { API_PAGE_CSP } from '../../src/http/openapi/page.js';

type Kind = 'page' | 'api-page' | 'file' | 'data';
interface Row {
  /** Where: `node` or `portal`. */
  at: 'node' | 'portal';
  path: string;
  kind: Kind;
  status: number;
  /** Start of the Content-Type. */
  type: string;
  method?: 'GET' | 'HEAD' | 'POST';
  headers?: Record<string, string>;
  /** Send the user's token. */
  auth?: boolean;
  /** A stream that does not end: read the headers, then hang up. */
  stream?: boolean;
}

const HTML = { Accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };

/** The CSP each kind must carry; a page's is checked by its parts (each page adds its own sources). */
function cspProblem(kind: Kind, csp: string | null): string | undefined {
  if (csp === null) return 'no Content-Security-Policy';
  switch (kind) {
    case 'file':
      return csp === ARTIFACT_CSP ? undefined : `not the artifact sandbox: ${csp}`;
    case 'data':
      return csp === DEFAULT_CSP ? undefined : `not the default policy: ${csp}`;
    case 'api-page':
      return csp === API_PAGE_CSP ? undefined : `not the API page's policy: ${csp}`;
    case 'page': {
      const parts = new Map(csp.split(';').map((p) => p.trim().split(/\s+/)).map(([k, ...v]) => [k!, v]));
      const ok = parts.get('default-src')?.join(' ') === "'none'" && parts.get('script-src')?.join(' ') === "'self'" && parts.get('frame-ancestors')?.join(' ') === "'none'" && parts.get('base-uri')?.join(' ') === "'none'";
      return ok ? undefined : `not a page policy (default-src 'none', script-src 'self', frame-ancestors 'none', base-uri 'none'): ${csp}`;
    }
  }
}

describe('security headers of every answer, node and portal', function () {
  this.timeout(300_000);
  let farm: TestFarm;
  /** A node on its own (its v2 takes its own tokens), and a node of the farm (its results uploaded to the portal). */
  let node: TestDaemon;
  let member: TestDaemon;
  const token = { node: '', portal: '' };
  const id = { node: '', portal: '' };
  let job: string;

  /** Run the hostile test case on a node through its own v1; the job and result ids. */
  async function runOn(d: TestDaemon): Promise<{ job: string; id: string }> {
    const res = await fetch(`${d.url}/api/v1/run_tests`, { method: 'POST', body: JSON.stringify({ test_pack_revision: 'main', test_cases: [HOSTILE_CASE] }) });
    expect(res.status, await res.clone().text()).to.equal(200);
    const uid = ((await res.json()) as { job_uid: string }).job_uid;
    await waitForJob(d, uid);
    return { job: uid, id: ((await (await fetch(`${d.url}/api/v1/jobs${uid}/results`)).json()) as Array<{ result_id: string }>)[0]!.result_id };
  }

  before(async () => {
    node = await startTestDaemon({ files: { 'tests/hostile.py': HOSTILE_TEST } });
    token.node = (await asUser(node, 'alice')).token;
    ({ job, id: id.node } = await runOn(node));
    farm = await startTestFarm();
    member = await farm.addNode('rack-sec', { files: { 'tests/hostile.py': HOSTILE_TEST }, config: { capture: { uri: 'none:' } } });
    token.portal = await farm.tokenFor('alice');
    id.portal = (await runOn(member)).id;
    // The portal serves the result's files from its own storage once the node uploaded them all.
    await waitFor(async () => (await farm.portal.store.get(id.portal)) !== undefined && !(await farm.portal.store.filesOnNode(id.portal)), { what: 'the result uploaded to the portal', timeoutMs: 60_000 });
  });
  after(async () => {
    await node?.stop();
    await farm?.stop();
  });

  it('every page, API answer, error, static file, stream and artifact carries its headers', async () => {
    const [, nodeId, hex, num, stamp] = id.node.split('/') as [string, string, string, string, string];
    const n = (path: string, kind: Kind, status: number, type: string, more: Partial<Row> = {}): Row => ({ at: 'node', path, kind, status, type, ...more });
    const p = (path: string, kind: Kind, status: number, type: string, more: Partial<Row> = {}): Row => ({ at: 'portal', path, kind, status, type, ...more });
    const rows: Row[] = [
      // A node's pages.
      n('/', 'page', 200, 'text/html'),
      n('/app/sign-in', 'page', 200, 'text/html'),
      n('/app/results', 'page', 200, 'text/html'),
      n(`/app/results/${nodeId}/${hex}/${num}/${stamp}`, 'page', 200, 'text/html'),
      n(`/app/jobs${job}`, 'page', 200, 'text/html'),
      n('/app/live', 'page', 200, 'text/html'),
      n('/app/jobs/farmhand-test/ffff/999', 'page', 404, 'text/html', { headers: HTML }),
      n('/app/api', 'api-page', 200, 'text/html'),
      // Static files.
      n('/static/portal.css', 'data', 200, 'text/css'),
      n('/static/result.js', 'data', 200, 'text/javascript'),
      n('/static/none.js', 'data', 404, 'application/json'),
      // v1.
      n('/api/v1/results', 'data', 200, 'application/json'),
      n(`/api/v1/result${id.node}`, 'data', 200, 'application/json'),
      n(`/api/v1/jobs${job}`, 'data', 200, 'application/json'),
      n(`/api/v1/jobs${job}/results`, 'data', 200, 'application/json'),
      n(`/api/v1/result${id.node}/artifacts/`, 'data', 200, 'application/json'),
      n('/api/v1/run_tests', 'data', 400, 'application/json', { method: 'POST', headers: { 'Content-Type': 'application/json' } }),
      n('/api/v1/jobs/farmhand-test/ffff/999', 'data', 404, 'application/json'),
      // v2.
      n('/api/v2/user', 'data', 200, 'application/json', { auth: true }),
      n('/api/v2/user', 'data', 403, 'application/json'),
      n('/api/v2/nodes', 'data', 200, 'application/json', { auth: true }),
      n('/api/v2/results', 'data', 200, 'application/json', { auth: true }),
      n('/api/v2/results?tz=Not/AZone', 'data', 400, 'application/json', { auth: true }),
      n('/api/v2/results.csv', 'data', 200, 'text/csv', { auth: true }),
      n('/api/v2/results.xml', 'data', 200, 'application/xml', { auth: true }),
      n(`/api/v2/results${id.node}`, 'data', 200, 'application/json', { auth: true }),
      n(`/api/v2/results${id.node}/stbt.log?tz=Europe/London`, 'data', 200, 'text/plain', { auth: true }),
      n(`/app/results/${nodeId}/${hex}/${num}/${stamp}/log.vtt`, 'data', 200, 'text/vtt'),
      n('/api/v2/no/such/endpoint', 'data', 404, 'application/json', { auth: true }),
      n('/api/openapi.json', 'data', 200, 'application/json'),
      n('/healthz', 'data', 200, 'application/json'),
      n('/readyz', 'data', 200, 'application/json'),
      n('/metrics', 'data', 200, 'text/plain'),
      // An HTML fragment a page's script fetches: not a page, so the default sandbox.
      n(`/app/results/row?result_id=${encodeURIComponent(id.node)}`, 'data', 200, 'text/html'),
      n('/app/sign-in', 'data', 400, 'application/json', { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }),
      // Streams.
      n('/app/live/stream.mjpeg', 'data', 200, 'multipart/x-mixed-replace', { stream: true }),
      n('/app/live/frame.png', 'data', 200, 'image/png'),
      n('/app/events', 'data', 200, 'text/event-stream', { stream: true }),
      n('/api/v2/events', 'data', 200, 'text/event-stream', { auth: true, stream: true }),
      // A result's files: the artifact sandbox, whatever the type, whole, partial, HEAD; errors are data.
      n(`/api/v1/result${id.node}/artifacts/report.html`, 'file', 200, 'text/html'),
      n(`/api/v1/result${id.node}/artifacts/evil.svg`, 'file', 200, 'image/svg+xml'),
      n(`/api/v1/result${id.node}/artifacts/shot.png`, 'file', 200, 'image/png'),
      n(`/api/v2/results${id.node}/artifacts/report.html`, 'file', 200, 'text/html', { auth: true }),
      n(`/api/v2/results${id.node}/artifacts/report.html`, 'file', 206, 'text/html', { auth: true, headers: { Range: 'bytes=0-9' } }),
      n(`/api/v2/results${id.node}/artifacts/evil.svg`, 'file', 200, 'image/svg+xml', { auth: true, method: 'HEAD' }),
      // A refused range: the JSON error keeps the file's sandbox (set before the range is read).
      n(`/api/v2/results${id.node}/artifacts/report.html`, 'file', 416, 'application/json', { auth: true, headers: { Range: 'bytes=99999999-' } }),
      n(`/api/v1/result${id.node}/artifacts/no-such-file.html`, 'data', 404, 'application/json'),
      n(`/api/v1/result${id.node}/farmhand.log`, 'file', 200, 'text/plain'),
      n(`/api/v1/result${id.node}/screenshot.png`, 'file', 200, 'image/png'),
      // The portal's own pages and answers.
      p('/', 'page', 200, 'text/html'),
      p('/app/sign-in', 'page', 200, 'text/html'),
      p('/static/portal.css', 'data', 200, 'text/css'),
      p('/healthz', 'data', 200, 'application/json'),
      p('/api/v2/user', 'data', 200, 'application/json', { auth: true }),
      p('/api/v2/user', 'data', 403, 'application/json'),
      p('/api/v2/nodes', 'data', 200, 'application/json', { auth: true }),
      p('/api/v2/results', 'data', 200, 'application/json', { auth: true }),
      p('/api/v2/results.csv', 'data', 200, 'text/csv', { auth: true }),
      p(`/api/v2/results${id.portal}`, 'data', 200, 'application/json', { auth: true }),
      p('/api/v2/results?tz=Not/AZone', 'data', 400, 'application/json', { auth: true }),
      p('/api/v2/no/such/endpoint', 'data', 404, 'application/json', { auth: true }),
      p('/api/v2/events', 'data', 200, 'text/event-stream', { auth: true, stream: true }),
      // Artifacts the portal serves from its storage (uploaded copies).
      p(`/api/v2/results${id.portal}/artifacts/report.html`, 'file', 200, 'text/html', { auth: true }),
      p(`/api/v2/results${id.portal}/artifacts/evil.svg`, 'file', 200, 'image/svg+xml', { auth: true }),
      p(`/api/v1/result${id.portal}/artifacts/report.html`, 'file', 200, 'text/html'),
      p(`/api/v2/results${id.portal}/stbt.log`, 'file', 200, 'text/plain', { auth: true }),
      p(`/api/v2/results${id.portal}/artifacts`, 'data', 200, 'application/json', { auth: true }),
    ];
    const problems: string[] = [];
    for (const r of rows) {
      const base = r.at === 'node' ? node.url : farm.url;
      const abort = new AbortController();
      const res = await fetch(base + r.path, {
        method: r.method ?? 'GET',
        headers: { ...r.headers, ...(r.auth && { Authorization: `token ${token[r.at]}` }) },
        ...(r.method === 'POST' && { body: '{}' }),
        signal: abort.signal,
      });
      if (r.stream) abort.abort();
      else await res.arrayBuffer();
      const h = res.headers;
      const where = `${r.at} ${r.method ?? 'GET'} ${r.path}${r.headers?.Range ? ` (${r.headers.Range})` : ''}`;
      const wrong = [
        res.status !== r.status && `status ${res.status}, not ${r.status}`,
        !(h.get('content-type') ?? '').startsWith(r.type) && `Content-Type ${h.get('content-type')}, not ${r.type}`,
        h.get('x-content-type-options') !== 'nosniff' && `X-Content-Type-Options ${h.get('x-content-type-options')}`,
        h.get('referrer-policy') !== 'same-origin' && `Referrer-Policy ${h.get('referrer-policy')}`,
        h.get('x-frame-options') !== 'DENY' && `X-Frame-Options ${h.get('x-frame-options')}`,
        cspProblem(r.kind, h.get('content-security-policy')),
      ].filter(Boolean);
      if (wrong.length) problems.push(`${where}: ${wrong.join('; ')}`);
    }
    expect(problems, `${problems.length} of ${rows.length} answers`).to.deep.equal([]);
  });

  it('the policies themselves: the artifact sandbox runs no script, sends no form, has no origin; the default loads nothing', () => {
    const directives = (csp: string) => csp.split(';').map((d) => d.trim());
    expect(directives(ARTIFACT_CSP)).to.include.members(['sandbox', "default-src 'none'", "form-action 'none'", "frame-ancestors 'none'", "base-uri 'none'"]);
    expect(ARTIFACT_CSP).to.not.match(/script-src|allow-scripts|allow-same-origin|allow-forms|allow-popups|connect-src|\*/);
    expect(directives(DEFAULT_CSP)).to.have.members(["default-src 'none'", "frame-ancestors 'none'", 'sandbox']);
  });
});
