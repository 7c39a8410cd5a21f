/**
 * A test pack written in stb-tester's style (test/fixtures/stbt-pack: page
 * objects, packages with relative imports, `import stbt` and
 * `import stbt_core`, transparent templates, stbt.conf sections and the
 * node's own config) runs unchanged through the daemon on the virtual
 * set-top box: capture through ffmpeg, presses through the IR path. Each
 * result is asserted, and the run log shows the stbt calls.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import request from 'supertest';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { HOME_ITEMS, initialState, renderFrame, viewOf, VSTB_LIRCD_CONF, VSTB_REMOTE_FILE } from '../../src/hardware/virtual/index.js';
import { packFromFolder, type TestPackRepo } from '../fixtures/testPack.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, testConfig, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { capturingLogger } from '../helpers/logger.js';
import { ensureSystemUser, holdSystemUser } from '../helpers/testUser.js';
import { waitFor } from '../helpers/wait.js';

/** The COMPAT command-line client (../shared/COMPAT.md), standard-library Python as CI systems run it. */
const CLIENT = path.resolve('scripts/farmhand-v2-client.py');

/** Run the command-line client in `cwd`; never throws on a non-zero exit. */
function client(cwd: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile('/usr/bin/python3', [CLIENT, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 380_000 }, (e, out, err) => {
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, out, err });
    });
  });
}
const W = 1280;
const H = 720;
/** The template of a focused menu item: its box plus a transparent 16-pixel margin (as tests/pages/menu.py's item_region). */
const templateRegion = (i: number) => ({ x: 72, y: 132 + i * 96, width: 332, height: 96 });
const MARGIN = 16;

/** `focused-<label>.png` for every menu item, rendered by the virtual box; the margin transparent and magenta. */
async function renderTemplates(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (let i = 0; i < HOME_ITEMS.length; i++) {
    const frame = await renderFrame(viewOf({ ...initialState(), homeFocus: i }), '12:00:00', W, H);
    const r = templateRegion(i);
    const rgba = Buffer.alloc(r.width * r.height * 4);
    for (let y = 0; y < r.height; y++) {
      for (let x = 0; x < r.width; x++) {
        const o = (y * r.width + x) * 4;
        const inside = x >= MARGIN && x < r.width - MARGIN && y >= MARGIN && y < r.height - MARGIN;
        if (inside) {
          frame.copy(rgba, o, ((r.y + y) * W + r.x + x) * 3, ((r.y + y) * W + r.x + x) * 3 + 3);
          rgba[o + 3] = 255;
        } else {
          rgba.set([255, 0, 255, 0], o); // magenta where matching must not look
        }
      }
    }
    const name = `focused-${HOME_ITEMS[i]!.label.toLowerCase().replace(/ /g, '-')}.png`;
    await writeFile(path.join(dir, name), await sharp(rgba, { raw: { width: r.width, height: r.height, channels: 4 } }).png().toBuffer());
  }
}

function stbtPack(): Promise<TestPackRepo> {
  return packFromFolder('test/fixtures/stbt-pack', async (dir) => {
    await mkdir(path.join(dir, 'config', 'remote-control'), { recursive: true });
    await writeFile(path.join(dir, VSTB_REMOTE_FILE), VSTB_LIRCD_CONF);
    await renderTemplates(path.join(dir, 'tests', 'pages', 'images'));
  });
}

const EXPECTED: Record<string, 'pass' | 'fail' | 'error'> = {
  'tests/menu/test_menu.py::test_focus_moves_down': 'pass',
  'tests/menu/test_menu.py::test_pressing_holds_a_key': 'pass',
  'tests/menu/test_menu.py::test_press_until_match': 'pass',
  'tests/menu/test_menu.py::test_keypress_and_pacing': 'pass',
  'tests/menu/test_menu.py::test_frames_are_new_and_in_order': 'pass',
  'tests/menu/test_menu.py::test_wrong_item_fails': 'fail',
  'tests/misc/test_misc.py::test_config_and_root': 'pass',
  'tests/misc/test_misc.py::test_screenshot_saved': 'pass',
  'tests/misc/test_misc.py::test_failure_on_purpose': 'fail',
  'tests/misc/test_misc.py::test_precondition_error': 'error',
};

describe('a test pack in stb-tester style, through the daemon', function () {
  this.timeout(400_000);
  let d: TestDaemon;
  let pack: TestPackRepo;

  before(async () => {
    pack = await stbtPack();
    d = await startTestDaemon({ pack, config: { capture: { uri: 'virtual:', width: W, height: H, fps: 25, preview_fps: 5 }, ir: { uri: 'virtual:' } } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
    await pack?.cleanup();
  });

  it('finds the test cases in packages as before, and each one ends as stb-tester would report it', async () => {
    const names = (await d.http.get('/api/v1/test_pack/main/test_case_names')).body as string[];
    expect(names).to.deep.equal(Object.keys(EXPECTED).sort());
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: Object.keys(EXPECTED) });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 380_000);
    const results = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    const byName = Object.fromEntries(results.map((r) => [r.test_case, r]));
    for (const [name, expected] of Object.entries(EXPECTED)) {
      expect(byName[name]?.result, `${name}: ${byName[name]?.failure_reason}`).to.equal(expected);
    }
    // The reason names the line of the wait_for_match that timed out, as stb-tester's does (read from the fixture).
    const menuLines = (await readFile('test/fixtures/stbt-pack/tests/menu/test_menu.py', 'utf8')).split('\n');
    const line = menuLines.findIndex((l) => l.includes('stbt.wait_for_match(focused_image(ITEMS[4])')) + 1;
    expect(line, 'the failing wait_for_match in the fixture').to.be.above(0);
    expect(byName['tests/menu/test_menu.py::test_wrong_item_fails']!.failure_reason).to.match(new RegExp(`^MatchTimeout: .* \\(at tests/menu/test_menu\\.py line ${line}\\)$`));
    expect(byName['tests/misc/test_misc.py::test_failure_on_purpose']!.failure_reason).to.equal('AssertionError: the greeting differs');
    expect(byName['tests/misc/test_misc.py::test_precondition_error']!.failure_reason).to.match(/^PreconditionError: /);

    // The run log shows the stbt calls at their times: presses, matches, draw_text and debug.
    const log = (id: string) => d.http.get(`/api/v1/result${byName[id]!.result_id}/farmhand.log`).then((r) => r.text);
    const down = await log('tests/menu/test_menu.py::test_focus_moves_down');
    expect(down).to.match(/^\S+ press KEY_MENU remote=vstb transport=virtual:$/m);
    expect(down).to.match(/^\S+ draw_text: moving down to Guide/m);
    expect(down.indexOf('draw_text: moving down to Guide')).to.be.lessThan(down.lastIndexOf('press KEY_DOWN'));
    expect(down).to.match(/^\S+ match \S*focused-guide\.png/m);
    expect(await log('tests/menu/test_menu.py::test_keypress_and_pacing')).to.match(/^\S+ debug: press gap 0\.\d{3} s$/m);
    // pressing(): the key went down before the focus moved, and up when the block ended.
    const held = await log('tests/menu/test_menu.py::test_pressing_holds_a_key');
    const keyDown = held.search(/^\S+ press KEY_DOWN \(hold until released\) remote=vstb transport=virtual:$/m);
    const keyUp = held.search(/^\S+ release KEY_DOWN$/m);
    expect(keyDown, held).to.be.greaterThan(-1);
    expect(keyUp, held).to.be.greaterThan(keyDown);
    expect(held.slice(keyDown, keyUp)).to.match(/match \S*focused-guide\.png matched/);
    const wrong = await log('tests/menu/test_menu.py::test_wrong_item_fails');
    expect(wrong).to.match(/^\S+ wait_for_match \S*focused-settings\.png: no match within 2 s$/m);
    // The traceback names the test's own line.
    const tb = (await d.http.get(`/api/v1/result${byName['tests/menu/test_menu.py::test_wrong_item_fails']!.result_id}/artifacts/stderr.log`)).text;
    expect(tb).to.include(`tests/menu/test_menu.py", line ${line}, in test_wrong_item_fails`);
    // save_frame writes into the result folder: an artifact of the run.
    const listing = (await d.http.get(`/api/v1/result${byName['tests/misc/test_misc.py::test_screenshot_saved']!.result_id}/artifacts/`)).body as Record<string, unknown>;
    expect(listing).to.have.property('corner.png');
  });

  it('runs the same way through v2, with tags reaching stbt.get_config("result.tags", ...)', async () => {
    const as = await asUser(d, 'alice');
    const cases = ['tests/misc/test_misc.py::test_config_and_root', 'tests/misc/test_misc.py::test_precondition_error', 'tests/menu/test_menu.py::test_focus_moves_down'];
    const res = await as.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: cases, shuffle: false, tags: { 'jenkins/BUILD_ID': '42' } });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 300_000);
    const rows = (await as.get('/api/v2/results').query({ filter: `job:${res.body.job_uid}` })).body as Array<Record<string, string>>;
    const byName = Object.fromEntries(rows.map((r) => [r.test_case, r]));
    for (const name of cases) expect(byName[name]?.result, `${name}: ${byName[name]?.failure_reason}`).to.equal(EXPECTED[name]);
    const build = await as.get(`/api/v2/results${byName[cases[0]!]!.result_id}/artifacts/build.txt`);
    expect(build.text).to.equal('42');
  });

  it('runs through the COMPAT command-line client (scripts/farmhand-v2-client.py): each result, the jUnit XML and the artifacts', async () => {
    const work = await mkdtemp(path.join(os.tmpdir(), 'farmhand-stbt-client-'));
    try {
      const { token } = await new TokenStore(tokensFile(d.dataDir)).create('ci');
      await writeFile(path.join(work, 'token'), `${token}\n`);
      const base = ['--portal', d.url, '--token-file', path.join(work, 'token')];
      await waitFor(async () => (await client(work, ['user', ...base])).code === 0, { what: 'the node to accept the new token', timeoutMs: 30_000 });
      const cases = Object.keys(EXPECTED);
      const r = await client(work, ['run', ...base, '--node-id', 'farmhand-test', '--revision', 'HEAD', ...cases], { JENKINS_URL: 'http://jenkins.invalid/', BUILD_ID: '77' });
      const said = `exit ${r.code}\n--- stdout\n${r.out}--- stderr\n${r.err}`;
      // Some cases fail or error on purpose: exit 1, as for any CI job with a failed test.
      expect(r.code, said).to.equal(1);
      const lines = r.out.split('\n');
      for (const [name, expected] of Object.entries(EXPECTED)) {
        const line = lines.find((l) => l.startsWith(`${name}: `));
        expect(line, said).to.match(new RegExp(`^${name.replace(/[.]/g, '\\.')}: ${expected}(: |$)`));
      }
      expect(r.out).to.include('tests/misc/test_misc.py::test_failure_on_purpose: fail: AssertionError: the greeting differs');
      const xml = await readFile(path.join(work, 'stbt-results.xml'), 'utf8');
      const inXml = [...xml.matchAll(/<testcase classname="([^"]*)" name="([^"]*)"/g)].map((m) => `${m[1]}::${m[2]}`);
      expect(inXml.sort()).to.deep.equal([...cases].sort());
      // The Jenkins build id reached stbt.get_config('result.tags', ...), and the test's files came down.
      const arts = path.join(work, 'stbt-artifacts', 'tests');
      expect(await readFile(path.join(arts, 'misc/test_misc.py/test_config_and_root/build.txt'), 'utf8')).to.equal('77');
      expect((await readFile(path.join(arts, 'misc/test_misc.py/test_screenshot_saved/corner.png'))).subarray(1, 4).toString()).to.equal('PNG');
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
});

describe('the stbt pack when tests run as another user (runner.run_tests_as)', function () {
  this.timeout(300_000);
  const TEST_USER = 'farmhand-test';
  // One file at a time runs tests as TEST_USER: a daemon ends that user's processes (test/helpers/testUser.ts).
  let releaseUser: (() => void) | undefined;
  before(async function () {
    this.timeout(11 * 60_000);
    releaseUser = await holdSystemUser(TEST_USER);
  });
  let parent: string;
  let pack: TestPackRepo;
  let daemon: Daemon | undefined;

  before(async () => {
    ensureSystemUser(TEST_USER);
    // As /etc/farmhand and /var/lib/farmhand: a folder anyone may pass through.
    parent = await mkdtemp(path.join(os.tmpdir(), 'farmhand-stbt-user-'));
    await chmod(parent, 0o755);
    await mkdir(path.join(parent, 'data'));
    pack = await stbtPack();
    const config = testConfig(pack.dir, path.join(parent, 'data'), {
      capture: { uri: 'virtual:', width: W, height: H, fps: 25, preview_fps: 5 },
      ir: { uri: 'virtual:' },
      runner: { run_tests_as: TEST_USER },
    });
    daemon = await startDaemon(config, capturingLogger());
    await waitFor(() => daemon!.services.frames.health().online, { what: 'capture to come online', timeoutMs: 30_000 });
  });
  after(async () => {
    await daemon?.stop();
    await pack?.cleanup();
    if (parent) await rm(parent, { recursive: true, force: true });
  });
  after(() => releaseUser?.());

  it('frames, presses, matches against the pack\'s templates and get_config with the node\'s own conf all work as that user', async () => {
    const http = () => request(daemon!.url);
    const cases = [
      'tests/menu/test_menu.py::test_frames_are_new_and_in_order',
      'tests/menu/test_menu.py::test_focus_moves_down',
      'tests/misc/test_misc.py::test_config_and_root',
      'tests/misc/test_misc.py::test_screenshot_saved',
    ];
    const res = await http().post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: cases });
    expect(res.status, res.text).to.equal(200);
    const job = res.body.job_uid as string;
    await waitFor(async () => (await http().get(`/api/v1/jobs${job}`)).body.status === 'exited', { what: `job ${job} to end`, timeoutMs: 280_000 });
    const results = (await http().get(`/api/v1/jobs${job}/results`)).body as Array<Record<string, string>>;
    const byName = Object.fromEntries(results.map((r) => [r.test_case, r]));
    for (const name of cases) {
      const log = byName[name] ? (await http().get(`/api/v1/result${byName[name]!.result_id}/artifacts/stderr.log`)).text : '';
      expect(byName[name]?.result, `${name}: ${byName[name]?.failure_reason}\n${log}`).to.equal('pass');
    }
    const log = (await http().get(`/api/v1/result${byName[cases[1]!]!.result_id}/farmhand.log`)).text;
    expect(log).to.include(`as user ${TEST_USER}`);
    expect(log).to.match(/^\S+ press KEY_DOWN remote=vstb transport=virtual:$/m);
    expect(log).to.match(/^\S+ match \S*focused-guide\.png/m);
  });
});
