/**
 * The triage page (`/app/results/<result_id>`, v2 `triage_url`): content,
 * escaping, links; the page read back with xmllint (it is well-formed XML).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { ArtifactListing, ResultRecord } from '../../src/core/model.js';
import { logTail, triagePage, type TriageInput } from '../../src/http/triage.js';
import { resultRecord } from '../fixtures/records.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const BASE = 'https://farm.example:8443';
const API = `${BASE}/api/v2/results/node-1/4f2a/7/2026-11-23_09.19.15`;

const rec = (over: Partial<ResultRecord> = {}): ResultRecord =>
  resultRecord({
    tags: { 'jenkins/BUILD_ID': '42' },
    result: 'fail',
    failure_reason: 'AssertionError: menu not found',
    traceback: 'Traceback (most recent call last):\n  File "tests/menus.py", line 9\nAssertionError: menu not found',
    ...over,
  });

const files = (...names: string[]): ArtifactListing =>
  Object.fromEntries(names.map((n, i) => [n, { size: 100 + i, md5: 'd41d8cd98f00b204e9800998ecf8427e' }]));

const page = (over: Partial<TriageInput> = {}) =>
  triagePage({ record: rec(), artifacts: files('screenshot.png', 'video.mp4', 'farmhand.log'), logText: 'x\n', base: BASE, ...over });

describe('triage page (/app/results/<result_id>)', () => {
  let dir: string;
  let n = 0;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-triage-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** Evaluates XPath over the page with libxml2's strict XML parser: any stray `<` or `&` from the run fails the test. */
  async function xpath(htmlText: string, expr: string): Promise<string> {
    const file = path.join(dir, `p${n++}.html`);
    await writeFile(file, htmlText);
    return execFileSync('xmllint', ['--xpath', expr, file], { encoding: 'utf8' }).replace(/\n$/, '');
  }

  it('shows the result fields, failure reason and traceback', async () => {
    const p = page();
    expect(await xpath(p, 'string(//title)')).to.equal('fail: tests/menus.py::test_open_menu');
    expect(await xpath(p, 'string(//p[@class="reason"])')).to.equal('AssertionError: menu not found');
    expect(await xpath(p, 'string(//pre[@class="traceback"])')).to.equal(rec().traceback);
    const field = (name: string) => xpath(p, `string(//tr[th="${name}"]/td)`);
    expect(await field('Start')).to.equal('2026-11-23T09:19:15.123+00:00');
    expect(await field('Duration')).to.equal('12.345 s');
    expect(await field('Test pack')).to.equal('0123456789abcdef0123456789abcdef01234567 (main)');
    expect(await field('Tags')).to.equal('jenkins/BUILD_ID = 42');
    expect(await xpath(p, 'string(//tr[th="Job"]/td/a/@href)')).to.equal(`${BASE}/api/v2/jobs/node-1/4f2a/7`);
  });

  it('a passing run has no failure section', () => {
    expect(page({ record: rec({ result: 'pass', failure_reason: null, traceback: null }) })).not.to.include('<h2>Failure</h2>');
  });

  it('escapes everything from the run: a failure reason with <script> stays text', async () => {
    const evil = '<script>alert(1)</script>';
    const p = page({
      record: rec({
        failure_reason: `AssertionError: ${evil}`,
        traceback: `"'><img src=x onerror=alert(2)>`,
        test_case: `tests/a.py::test_${evil}`,
        tags: { [`k${evil}`]: `v"${evil}` },
        category: `c${evil}`,
      }),
      artifacts: files(`"><script>alert(3)</script>.txt`),
      logText: `2026-11-23T09:19:15.123456+00:00 ${evil}\n`,
    });
    expect(p).not.to.match(/<script/i);
    expect(p).not.to.match(/<img src=x/i);
    expect(await xpath(p, 'string(//p[@class="reason"])')).to.equal(`AssertionError: ${evil}`);
    expect(await xpath(p, 'string(//pre[@class="traceback"])')).to.equal(`"'><img src=x onerror=alert(2)>`);
    expect(await xpath(p, 'string(//pre[@class="log"])')).to.include(evil);
    expect(await xpath(p, 'count(//script)')).to.equal('0');
    expect(await xpath(p, 'count(//img)')).to.equal('0'); // no screenshot artifact, and nothing injected
  });

  it('forbids scripts with a Content-Security-Policy and loads no external asset', () => {
    const p = page();
    expect(p).to.match(/<meta http-equiv="Content-Security-Policy" content="default-src 'none';/);
    expect(p).not.to.match(/<link |<script|@import|url\(/);
  });

  it('shows the screenshot when the artifact exists, and the video.mp4 with controls', async () => {
    const p = page();
    expect(await xpath(p, 'string(//img/@src)')).to.equal(`${API}/screenshot.png`);
    expect(await xpath(p, 'string(//video/@src)')).to.equal(`${API}/artifacts/video.mp4`);
    expect(await xpath(p, 'count(//video[@controls])')).to.equal('1');
    const bare = page({ artifacts: files('stdout.log') });
    expect(bare).not.to.match(/<img|<video/);
  });

  it('links every artifact with each path segment URL-encoded', async () => {
    const p = page({ artifacts: files('screenshot.png', 'dir/a b#1?.txt', 'ünï/ç%.log') });
    const hrefs = (await xpath(p, '//table[@class="artifacts"]//a/@href')).trim().split(/\s+/);
    expect(hrefs).to.deep.equal([
      `href="${API}/artifacts/dir/a%20b%231%3F.txt"`,
      `href="${API}/artifacts/screenshot.png"`,
      `href="${API}/artifacts/%C3%BCn%C3%AF/%C3%A7%25.log"`,
    ]);
    expect(await xpath(p, 'string(//table[@class="artifacts"]//tr[a or td/a][1]/td[@class="size"])')).to.equal('101');
  });

  it('shows the last 500 lines of the log inline and links the full log', async () => {
    const log = Array.from({ length: 1200 }, (_, i) => `2026-11-23T09:19:15.123456+00:00 line ${i + 1}`).join('\n') + '\n';
    const p = page({ logText: Buffer.from(log) });
    const shown = (await xpath(p, 'string(//pre[@class="log"])')).split('\n');
    expect(shown).to.have.length(500);
    expect(shown[0]).to.equal('2026-11-23T09:19:15.123456+00:00 line 701');
    expect(shown[499]).to.equal('2026-11-23T09:19:15.123456+00:00 line 1200');
    expect(await xpath(p, 'string(//section[h2="Log"]//a/@href)')).to.equal(`${API}/farmhand.log`);
    expect(await xpath(p, 'string(//section[h2="Log"]/p)')).to.match(/^The last 500 lines/);
  });

  it('logTail keeps short logs whole and cuts long ones at a line boundary', () => {
    const tail = (s: string, k: number) => {
      const t = logTail(Buffer.from(s), k);
      return [t.tail.toString(), t.truncated];
    };
    expect(tail('a\nb\nc\n', 2)).to.deep.equal(['b\nc', true]);
    expect(tail('a\nb\nc', 3)).to.deep.equal(['a\nb\nc', false]);
    expect(tail('', 5)).to.deep.equal(['', false]);
    expect(tail('\n\nz', 2)).to.deep.equal(['\nz', true]);
  });

  it('shows times and log stamps in the tz asked for', async () => {
    const p = page({ logText: '2026-11-23T09:19:15.123456+00:00 hi\n', tz: 'Europe/Berlin' });
    expect(await xpath(p, 'string(//tr[th="End"]/td)')).to.equal('2026-11-23T10:19:27.468+01:00');
    expect(await xpath(p, 'string(//pre[@class="log"])')).to.equal('2026-11-23T10:19:15.123456+01:00 hi');
    expect(await xpath(p, 'string(//section[h2="Log"]//a/@href)')).to.equal(`${API}/farmhand.log?tz=Europe%2FBerlin`);
  });

  it('copes with a log that is not UTF-8 and with terminal control characters', async () => {
    const log = Buffer.concat([Buffer.from('2026-11-23T09:19:15.123456+00:00 \x1b[32mok\x1b[0m \x07'), Buffer.from([0xff, 0x0a])]);
    const p = page({ logText: log });
    expect(await xpath(p, 'string(//pre[@class="log"])')).to.equal('2026-11-23T09:19:15.123456+00:00 ok \uFFFD');
    expect(page({ logText: null })).to.include('This run has no log.');
  });
});

describe('triage page over HTTP: it obeys auth.v1_requires_token like the v1 API', function () {
  this.timeout(300_000); // a whole job of python runs: minutes on a loaded 2-core box
  let d: TestDaemon;
  let user: Awaited<ReturnType<typeof asUser>>;
  let page: string;

  before(async () => {
    d = await startTestDaemon({ config: { capture: { uri: 'none:' }, auth: { v1_requires_token: true } } });
    user = await asUser(d, 'ci');
    const run = await user.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'] });
    expect(run.status).to.equal(200);
    // Poll the job (with the token: v1 needs one here) until it has exited.
    await waitFor(async () => (await user.get(`/api/v1/jobs${run.body.job_uid}`)).body.status === 'exited', { what: 'the job to exit', timeoutMs: 240_000, intervalMs: 100 });
    const [result] = (await user.get(`/api/v1/jobs${run.body.job_uid}/results`)).body as Array<{ result_id: string }>;
    page = `/app/results${result!.result_id}`;
  });
  after(() => d?.stop());

  it('no token, or a bad one: 403 forbidden as JSON, as the API answers', async () => {
    for (const [p, auth] of [[page, undefined], [page.toUpperCase().replace('/APP/RESULTS', '/APP/results'), undefined], [page, 'token nope'], [`${page}/`, 'Basic eDp5']] as const) {
      const req = d.http.get(p);
      const res = auth ? await req.set('Authorization', auth) : await req;
      expect(res.status, p).to.equal(403);
      expect(res.type).to.equal('application/json');
      expect(res.body.error).to.equal('forbidden');
      expect(res.body.message).to.be.a('string');
    }
    // The same answer the v1 API gives for the same request.
    expect((await d.http.get(page.replace('/app/results', '/api/v1/result'))).status).to.equal(403);
  });

  it('with a token (Authorization: token ... or Bearer ...) the page is served', async () => {
    const res = await user.get(page);
    expect(res.status).to.equal(200);
    expect(res.type).to.equal('text/html');
    expect(res.text).to.contain('tests/basic.py::test_pass');
    const bearer = await d.http.get(page).set('Authorization', `Bearer ${user.token}`);
    expect(bearer.status).to.equal(200);
  });

  it('with v1_requires_token off (the default) the page needs no token', async () => {
    const open = await startTestDaemon({ config: { capture: { uri: 'none:' } } });
    try {
      const res = await open.http.get('/app/results/farmhand-test/abcd/1/2026-11-23_10.00.00');
      expect(res.status).to.equal(404); // reached the page's route: an unknown result, not a refusal
      expect(res.body.error).to.equal('not_found');
    } finally {
      await open.stop();
    }
  });
});
