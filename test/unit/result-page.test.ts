/**
 * The result page (`/app/results/<result_id>`, the v1/v2 `triage_url`; it
 * took the place of the triage page): content, escaping, links, the log tail
 * and its times, read back with libxml2's HTML parser through XPath; then
 * over HTTP, where it obeys `auth.v1_requires_token` like the v1 API.
 * The browser behaviour (video and log, rerun, artifacts) is in
 * test/web/result-page.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { renderToString } from 'preact-render-to-string';
import type { ArtifactListing, ResultRecord } from '../../src/core/model.js';
import { ResultPage, type ResultPageProps } from '../../src/web/pages/result.js';
import { artifactTree, logLines, logTail, logVtt, matchFailures, parseChecks, readTail, videoOffset } from '../../src/web/result-data.js';
import { resultRecord } from '../fixtures/records.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const API = '/api/v1/result/node-1/4f2a/7/2026-11-23_09.19.15';

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

interface PageInput {
  record?: ResultRecord;
  artifacts?: ArtifactListing;
  logText?: string | Buffer | null;
  tz?: string;
  videoStart?: string;
  checksText?: string;
}

/** The page's markup for a record, listing and log, as the route builds it. */
function page(over: PageInput = {}): string {
  const record = over.record ?? rec();
  const listing = over.artifacts ?? files('screenshot.png', 'video.mp4', 'farmhand.log');
  const tz = over.tz ?? 'UTC';
  const log = over.logText === undefined ? 'x\n' : over.logText;
  const { lines, truncated } = log === null ? { lines: [], truncated: false } : logLines(Buffer.from(log), tz);
  const props: ResultPageProps = {
    record,
    tz,
    hasLog: log !== null,
    lines,
    truncated,
    tree: artifactTree(listing),
    failures: matchFailures(lines, listing),
    checks: over.checksText === undefined ? [] : parseChecks(over.checksText, listing),
    video: ['video.mp4', 'video.webm'].find((n) => listing[n]),
    videoStart: over.videoStart,
    screenshot: listing['screenshot.png'] !== undefined,
    history: { runs: [{ result_id: record.result_id, result: record.result, start_time: record.start_time, test_pack_sha: record.test_pack_sha }], at: 0, verdict: 'The first run of this test case.' },
    nodeId: 'node-1',
    remote: null,
    signedIn: false,
  };
  return `<!doctype html>\n<html><head><meta charset="utf-8"><title>page</title></head><body>${renderToString(ResultPage(props))}</body></html>`;
}

/** Evaluates XPath over a page with libxml2's HTML parser: a `<script>` or `<img>` from the run would show up as an element. */
let dir: string;
let n = 0;
async function xpath(htmlText: string, expr: string): Promise<string> {
  const file = path.join(dir, `p${n++}.html`);
  await writeFile(file, htmlText);
  return execFileSync('xmllint', ['--html', '--xpath', expr, file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).replace(/\n$/, '');
}
/** checks.jsonl lines as python/stbt_core/_checks.py writes them. */
const CHECK_LINES = [
  { n: 0, kind: 'match', passed: true, time: 1795425556.0, region: null, params: { match_threshold: 0.8 }, score: 0.99, threshold: 0.8, image: 'ok.png', frame: 'checks/0.jpg', frame_size: [640, 360], template: 'checks/template-a.png', match_region: { x: 5, y: 6, width: 40, height: 40 }, first_pass: { passed: true }, confirm: { passed: true } },
  { n: 1, kind: 'match_text', passed: false, time: 1795425557.5, region: { x: 20, y: 85, width: 400, height: 60 }, params: { mode: 'PAGE_SEGMENTATION_WITHOUT_OSD' }, text: 'Weather', frame: 'checks/1.jpg', frame_size: [640, 360], preprocessing: ['crop to the region', 'greyscale'], words: [{ text: 'Evening', x: 40, y: 100, width: 120, height: 30, conf: 96.5 }, { text: 'News', x: 170, y: 100, width: 70, height: 30, conf: 95 }] },
  { n: 2, kind: 'ocr', passed: null, time: 1795425558.0, region: { x: 0, y: 0, width: 10, height: 10 }, params: {}, text: 'x', frame: '../result.json', words: [] },
].map((o) => JSON.stringify(o)).join('\n');

describe('result page (/app/results/<result_id>): markup', () => {
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-result-page-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('shows the result fields, failure reason, traceback and tags', async () => {
    const p = page();
    expect(await xpath(p, 'string(//p[@class="reason"])')).to.equal('AssertionError: menu not found');
    expect(await xpath(p, 'string(//pre[@class="traceback"])')).to.equal(rec().traceback);
    const field = (name: string) => xpath(p, `string(//tr[th="${name}"]/td)`);
    expect(await field('Start')).to.equal('2026-11-23T09:19:15.123+00:00');
    expect(await field('Duration')).to.equal('12.345 s');
    expect(await field('Test pack')).to.equal('0123456789abcdef0123456789abcdef01234567 (main)');
    expect(await field('Tags')).to.equal('jenkins/BUILD_ID = 42');
    expect(await xpath(p, 'string(//tr[th="Job"]/td/a/@href)')).to.equal('/api/v1/jobs/node-1/4f2a/7');
    expect(await xpath(p, 'string(//tr[th="Result id"]/td/a/@href)')).to.equal(API);
  });

  it('a failed run puts its last failed check first: the frame, the region and the words boxed, what it read', async () => {
    const listing = files('video.mp4', 'checks.jsonl', 'checks/0.jpg', 'checks/1.jpg', 'checks/template-a.png');
    const p = page({ artifacts: listing, checksText: CHECK_LINES, videoStart: '2026-11-23T09:19:14.900Z' });
    const why = '//section[@class="why-failed"]';
    expect(await xpath(p, `count(${why}//li[contains(@class,"check")])`)).to.equal('1');
    expect(await xpath(p, `string(${why}//li/@data-kind)`)).to.equal('match_text');
    expect(await xpath(p, `string(${why}//svg/*[local-name()="image"]/@href)`)).to.equal(`${API}/artifacts/checks/1.jpg`);
    expect(await xpath(p, `string(${why}//svg/*[local-name()="rect"][@class="region"]/@x)`)).to.equal('20');
    expect(await xpath(p, `count(${why}//svg/*[local-name()="rect"][@class="word"])`)).to.equal('2');
    expect(await xpath(p, `string(${why}//span[@class="verdict"])`)).to.equal('looked for "Weather", read: Evening News');
    // the "Why it failed" box comes before the failure's traceback, the video and the log
    expect(p.indexOf('why-failed')).to.be.lessThan(p.indexOf('class="failure"'));
    // every check in the Checks section, in time order, on the video's clock
    expect(await xpath(p, 'count(//ol[@id="checks"]/li)')).to.equal('3');
    expect(await xpath(p, 'string(//ol[@id="checks"]/li[1]//span[@class="verdict"])')).to.equal('score 0.99 >= threshold 0.8; first pass passed, confirm pass passed');
    expect(await xpath(p, 'string(//ol[@id="checks"]/li[1]//figure[@class="template"]/img/@src)')).to.equal(`${API}/artifacts/checks/template-a.png`);
    expect(await xpath(p, 'string(//ol[@id="checks"]/li[2]//a[@class="ts"]/@href)')).to.match(/^#t=\d+\.\d{3}$/);
    // a frame reference outside checks/ (or not listed) is not shown
    expect(await xpath(p, 'string(//ol[@id="checks"]/li[3]//p[@class="none"])')).to.equal('The frame was not saved.');
    expect(p).not.to.include('result.json');
  });

  it('a passing run has no "Why it failed" box; garbage lines in checks.jsonl are skipped', async () => {
    const p = page({ record: rec({ result: 'pass', failure_reason: null, traceback: null }), artifacts: files('checks.jsonl'), checksText: `not json\n[1]\n{"kind":"<script>x</script>","passed":false}\n` });
    expect(await xpath(p, 'count(//section[@class="why-failed"])')).to.equal('0');
    expect(await xpath(p, 'count(//ol[@id="checks"]/li)')).to.equal('1');
    expect(p).not.to.match(/<script/i);
  });

  it('a passing run has no failure section', async () => {
    const p = page({ record: rec({ result: 'pass', failure_reason: null, traceback: null }) });
    expect(await xpath(p, 'count(//section[@class="failure"])')).to.equal('0');
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
      logText: `2026-11-23T09:19:15.123456+00:00 ${evil}\nmatch ${evil}: no match; saved "><img src=x>-frame.png x-template.png\n`,
    });
    expect(p).not.to.match(/<script/i);
    expect(p).not.to.match(/<img src=x/i);
    expect(await xpath(p, 'string(//p[@class="reason"])')).to.equal(`AssertionError: ${evil}`);
    expect(await xpath(p, 'string(//pre[@class="traceback"])')).to.equal(`"'><img src=x onerror=alert(2)>`);
    expect(await xpath(p, 'string(//ol[@id="runlog"])')).to.include(evil);
    expect(await xpath(p, 'string(//span[@class="test-case"])')).to.equal(`tests/a.py::test_${evil}`);
    expect(await xpath(p, 'count(//script)')).to.equal('0');
    expect(await xpath(p, 'count(//img)')).to.equal('0'); // no screenshot artifact, and nothing injected
    expect(await xpath(p, 'count(//*[@onerror])')).to.equal('0');
  });

  it('shows the screenshot when the artifact exists, and the video.mp4 with controls and its clock', async () => {
    const p = page({ videoStart: '2026-11-23T09:19:14.900Z' });
    expect(await xpath(p, 'string(//img[@class="end-screenshot"]/@src)')).to.equal(`${API}/screenshot.png`);
    expect(await xpath(p, 'string(//video/@src)')).to.equal(`${API}/artifacts/video.mp4`);
    expect(await xpath(p, 'count(//video[@controls])')).to.equal('1');
    expect(await xpath(p, 'string(//video/@data-video-start)')).to.equal('2026-11-23T09:19:14.900Z');
    expect(await xpath(p, 'string(//video/@data-clock)')).to.equal('recorded');
    const bare = page({ artifacts: files('stdout.log') });
    expect(await xpath(bare, 'count(//img|//video)')).to.equal('0');
  });

  it('links every artifact in the tree with each path segment URL-encoded; folders are <details>', async () => {
    const p = page({ artifacts: files('screenshot.png', 'dir/a b#1?.txt', 'ünï/ç%.log') });
    const hrefs = (await xpath(p, '//ul[@class="tree"]//li[contains(@class,"file")]/a[1]/@href')).trim().split(/\s+/);
    expect(hrefs).to.deep.equal([
      `href="${API}/artifacts/dir/a%20b%231%3F.txt"`,
      `href="${API}/artifacts/%C3%BCn%C3%AF/%C3%A7%25.log"`,
      `href="${API}/artifacts/screenshot.png"`,
    ]);
    expect(await xpath(p, 'string(//li[@data-path="screenshot.png"]/span[@class="size"]/@data-bytes)')).to.equal('100');
    expect(await xpath(p, 'string(//li[@class="folder"][1]/details/summary)')).to.match(/^dir\//);
    expect(await xpath(p, 'string(//li[@data-path="screenshot.png"]//img/@src)')).to.equal(`${API}/artifacts/screenshot.png`);
  });

  it('shows the last 500 lines of the log inline and links the full log', async () => {
    const log = Array.from({ length: 1200 }, (_, i) => `2026-11-23T09:19:15.123456+00:00 line ${i + 1}`).join('\n') + '\n';
    const p = page({ logText: Buffer.from(log) });
    expect(await xpath(p, 'count(//ol[@id="runlog"]/li)')).to.equal('500');
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li[1])')).to.equal('2026-11-23T09:19:15.123456+00:00 line 701');
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li[500])')).to.equal('2026-11-23T09:19:15.123456+00:00 line 1200');
    expect(await xpath(p, 'string(//a[@class="full-log"]/@href)')).to.equal(`${API}/farmhand.log`);
    expect(await xpath(p, 'string(//div[@class="log-pane"]/p)')).to.match(/^The last 500 lines/);
  });

  it('each log line links its moment in the video: #t= seconds from the video`s first frame', async () => {
    const p = page({ logText: '2026-11-23T09:19:16.400250+00:00 press KEY_OK\n', videoStart: '2026-11-23T09:19:14.900Z' });
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li/@data-time)')).to.equal('2026-11-23T09:19:16.400250+00:00');
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li/a/@href)')).to.equal('#t=1.500');
    expect(videoOffset('2026-11-23T09:19:16.400250+00:00', '2026-11-23T09:19:14.900Z')).to.equal(1.5);
    expect(videoOffset('2026-11-23T09:19:16.401750+00:00', '2026-11-23T09:19:14.900Z')).to.equal(1.502);
    // Without a video the stamps are plain text.
    const noVideo = page({ artifacts: files('farmhand.log'), logText: '2026-11-23T09:19:16.400250+00:00 hi\n' });
    expect(await xpath(noVideo, 'count(//ol[@id="runlog"]//a)')).to.equal('0');
  });

  it('the log as WebVTT: cues on the video`s clock, one per stamp, escaped', () => {
    const log = [
      '2026-11-23T09:19:15.500000+00:00 press KEY_OK',
      '2026-11-23T09:19:16.250000+00:00 Traceback <x> & -->',
      '2026-11-23T09:19:16.250000+00:00   File "a.py"',
      '2026-11-23T09:21:17.000000+00:00 done',
    ].join('\n');
    const vtt = logVtt(logLines(Buffer.from(log), 'UTC').lines, '2026-11-23T09:19:15.000Z');
    expect(vtt).to.equal(
      'WEBVTT\n\n' +
        '00:00:00.500 --> 00:00:01.250\npress KEY_OK\n\n' +
        '00:00:01.250 --> 00:02:02.000\nTraceback &lt;x&gt; &amp; --&gt;\n  File "a.py"\n\n' +
        '00:02:02.000 --> 00:02:05.000\ndone\n',
    );
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

  it('reads at most the last 1 MiB of a long log, starting at a whole line', async () => {
    const line = `2026-11-23T09:19:15.123456+00:00 ${'y'.repeat(66)}\n`; // 100 bytes
    const file = path.join(dir, 'long.log');
    await writeFile(file, line.repeat(30_000)); // 3 MB
    const tail = await readTail(file, 3_000_000);
    expect(tail.length).to.be.at.most(1024 * 1024).and.at.least(1024 * 1024 - 100);
    expect(tail.toString('latin1', 0, 33)).to.equal(line.slice(0, 33));
    expect(tail.length % 100).to.equal(0);
  });

  it('shows times and log stamps in the tz asked for; the seek times stay on the UTC clock', async () => {
    const p = page({ logText: '2026-11-23T09:19:15.123456+00:00 hi\n', tz: 'Europe/Berlin', videoStart: '2026-11-23T09:19:15.000Z' });
    expect(await xpath(p, 'string(//tr[th="End"]/td)')).to.equal('2026-11-23T10:19:27.468+01:00');
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li)')).to.equal('2026-11-23T10:19:15.123456+01:00 hi');
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li/@data-time)')).to.equal('2026-11-23T09:19:15.123456+00:00');
    expect(await xpath(p, 'string(//a[@class="full-log"]/@href)')).to.equal(`${API}/farmhand.log?tz=Europe%2FBerlin`);
  });

  it('copes with a log that is not UTF-8 and with terminal control characters', async () => {
    const log = Buffer.concat([Buffer.from('2026-11-23T09:19:15.123456+00:00 \x1b[32mok\x1b[0m \x07'), Buffer.from([0xff, 0x0a])]);
    const p = page({ logText: log });
    expect(await xpath(p, 'string(//ol[@id="runlog"]/li)')).to.equal('2026-11-23T09:19:15.123456+00:00 ok \uFFFD');
    expect(page({ logText: null })).to.include('This run has no log.');
  });

  it('a failed match shows the template beside the frame, the best place boxed', async () => {
    const listing = files('video.mp4', 'match-failures/001-frame.png', 'match-failures/001-template.png');
    const logText =
      '2026-11-23T09:19:16.000000+00:00 wait_for_match images/menu.png: timed out after 2 s, best no match (confidence 0.412, threshold 0.9, at Region(x=10, y=20, width=30, height=40)); saved match-failures/001-frame.png match-failures/001-template.png\n';
    const { lines } = logLines(Buffer.from(logText), 'UTC');
    const [f] = matchFailures(lines, listing);
    expect(f).to.deep.include({ call: 'wait_for_match', template: 'images/menu.png', frame: 'match-failures/001-frame.png', templateImage: 'match-failures/001-template.png' });
    expect(f!.region).to.deep.equal({ x: 10, y: 20, width: 30, height: 40 });
    const p = page({ artifacts: listing, logText });
    expect(await xpath(p, 'string(//figure[@class="template"]/img/@src)')).to.equal(`${API}/artifacts/match-failures/001-template.png`);
    expect(await xpath(p, 'string(//figure[@class="frame"]//img/@src)')).to.equal(`${API}/artifacts/match-failures/001-frame.png`);
  });
});
describe('result page over HTTP: it obeys auth.v1_requires_token like the v1 API', function () {
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
    expect(res.text).to.contain('<title>pass: tests/basic.py::test_pass - farmhand</title>');
    // Scripts only from /static, none inline, whatever a test printed.
    const csp = String(res.headers['content-security-policy']);
    expect(csp).to.match(/default-src 'none'/).and.match(/script-src 'self'(;|$)/);
    expect(csp).not.to.include('unsafe-inline');
    expect(res.text.match(/<script[^>]*>/g)).to.deep.equal(['<script type="module" src="/static/result.js">']);
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
