// The Python test-script API end to end: a real git test pack, the real
// ProcessTestRunner spawning /usr/bin/python3 with the ControlServer's
// environment, a KeyPresser over a recording VirtualTransport, and frames
// this test supplies. Templates are PNG files cut out of the known frame and
// committed to the test pack.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import type { RunOutcome } from '../../src/core/model.js';
import { KeyPresser, repeatsFor } from '../../src/hardware/ir/keys.js';
import { LircEncoder, parseLircConfig } from '../../src/hardware/ir/lirc/index.js';
import { VirtualTransport, type VirtualIrEvent } from '../../src/hardware/ir/transports/index.js';
import { ControlServer, type ControlFrame } from '../../src/runner/control.js';
import { GitTestPack } from '../../src/runner/gitTestPack.js';
import { ProcessTestRunner } from '../../src/runner/testRunner.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { necRemote } from '../fixtures/remotes.js';
import { noisePixels } from '../helpers/noise.js';

const REMOTE = necRemote('porchbox', 0x7a85, { KEY_OK: 0x08f7, KEY_UP: 0x8877 });

const W = 320;
const H = 180;
/** Where the template is cut from the frame. */
const PATCH = { x: 201, y: 113, width: 40, height: 30 };
const PIXELS: [number, number][] = [[0, 0], [5, 3], [W - 1, H - 1], [17, 29], [PATCH.x, PATCH.y]];

const py = (...lines: string[]) => `${lines.join('\n')}\n`;
const API_TESTS = py(
  'import json, sys, time',
  'import farmhand',
  'from farmhand import Region',
  '',
  `PIXELS = ${JSON.stringify(PIXELS)}`,
  '',
  'def _out(name, value):',
  '    with open(name, "w") as f:',
  '        json.dump(value, f)',
  '',
  'def test_press():',
  '    farmhand.press("KEY_OK")',
  '    farmhand.press_and_hold("key_up", 0.5)',
  '',
  'def test_press_logged():',
  '    print("before", flush=True)',
  '    farmhand.press("KEY_OK")',
  '    print("between", flush=True)',
  '    farmhand.press_and_hold("key_up", 0.5)',
  '    print("after", flush=True)',
  '    try:',
  '        farmhand.press("KEY_NOPE")',
  '    except farmhand.ControlError:',
  '        pass',
  '',
  'def test_unknown_key():',
  '    farmhand.press("KEY_NOPE")',
  '',
  'def test_get_frame():',
  '    f = farmhand.get_frame()',
  '    _out("frame.json", {"type": type(f).__name__, "shape": list(f.shape), "dtype": str(f.dtype),',
  '                        "pixels": [f[y, x].tolist() for x, y in PIXELS]})',
  '',
  'def test_match():',
  '    m = farmhand.wait_for_match("images/patch.png", timeout_secs=5)',
  '    outside = farmhand.match("images/patch.png", region=Region(0, 0, 150, 100))',
  '    _out("match.json", {"match": bool(m), "region": list(m.region), "confidence": m.confidence,',
  '                        "outside": bool(outside), "outside_confidence": outside.confidence})',
  '',
  'def test_match_absent():',
  '    farmhand.wait_for_match("images/absent.png", timeout_secs=0.5)',
  '',
  'def test_black():',
  '    assert farmhand.is_screen_black(), "the screen is not black"',
  '',
  'def test_save_frame():',
  '    farmhand.save_frame(farmhand.get_frame(), "shots/frame.png")',
  '',
  'def test_without_numpy():',
  '    sys.modules["numpy"] = None  # "import numpy" now fails, as on a box without it',
  '    sys.modules["cv2"] = None',
  '    f = farmhand.get_frame()',
  '    assert isinstance(f, farmhand.Frame), type(f)',
  '    _out("frame.json", {"size": [f.width, f.height], "pixels": [list(f.pixel(x, y)) for x, y in PIXELS],',
  '                        "black": farmhand.is_screen_black(f)})',
  '    farmhand.save_frame(f, "plain.png")',
  '',
  'def test_wait_until():',
  '    calls = []',
  '    def ready():',
  '        calls.append(1)',
  '        return len(calls) >= 3 and "ready"',
  '    assert farmhand.wait_until(ready, interval_secs=0.01) == "ready"',
  '    assert len(calls) == 3',
  '    t0 = time.monotonic()',
  '    assert farmhand.wait_until(lambda: 0, timeout_secs=0.3, interval_secs=0.05) == 0',
  '    waited = time.monotonic() - t0',
  '    assert waited >= 0.3, waited  # it waits out its timeout (how much longer is the machine\'s load, not checked)',
);

const noise = noisePixels;

function crop(rgb: Buffer, width: number, r: typeof PATCH): Buffer {
  const out = Buffer.alloc(r.width * r.height * 3);
  for (let y = 0; y < r.height; y++) rgb.copy(out, y * r.width * 3, ((r.y + y) * width + r.x) * 3, ((r.y + y) * width + r.x + r.width) * 3);
  return out;
}

const png = (rgb: Buffer, width: number, height: number) => sharp(rgb, { raw: { width, height, channels: 3 } }).png().toBuffer();

/** Commit binary files on main with git fast-import (the fixture takes text only). */
async function commitBinary(gitDir: string, files: Record<string, Buffer>): Promise<void> {
  const parts: Buffer[] = [Buffer.from('commit refs/heads/main\ncommitter T <t@example.invalid> 1790000900 +0000\ndata 9\ntemplates\nfrom refs/heads/main^0\n')];
  for (const [name, data] of Object.entries(files)) parts.push(Buffer.from(`M 100644 inline ${name}\ndata ${data.length}\n`), data, Buffer.from('\n'));
  await new Promise<void>((resolve, reject) => {
    const p = execFile('git', [`--git-dir=${gitDir}`, 'fast-import', '--quiet'], (err) => (err ? reject(err) : resolve()));
    p.stdin?.end(Buffer.concat(parts));
  });
}

describe('Python API through the control socket (real python3 via ProcessTestRunner)', function () {
  let pack: TestPackRepo;
  let data: string;
  let tp: GitTestPack;
  let sha: string;
  let checkoutDir: string;
  let events: VirtualIrEvent[];
  let frame: ControlFrame | undefined;
  let control: ControlServer;
  let runs = 0;
  const rgb = noise(W, H, 11);

  before(async () => {
    pack = await makeTestPack({
      'config/stbt.conf': '[test_pack]\ndefault_remote_control = porch\n',
      'config/remote-control/porch.lircd.conf': REMOTE,
      'tests/api.py': API_TESTS,
    });
    await commitBinary(pack.dir, {
      'tests/images/patch.png': await png(crop(rgb, W, PATCH), PATCH.width, PATCH.height),
      'tests/images/absent.png': await png(noise(PATCH.width, PATCH.height, 99), PATCH.width, PATCH.height),
    });
    sha = await pack.git('rev-parse', 'refs/heads/main');
    data = await mkdtemp(path.join(tmpdir(), 'farmhand-pyapi-'));
    tp = new GitTestPack({ url: pack.dir, dir: path.join(data, 'tp.git'), worktreesDir: path.join(data, 'checkouts') });
    await tp.open();
    checkoutDir = await tp.checkout(sha);
    const keys = new KeyPresser({ testPack: tp, transport: new VirtualTransport((e) => events.push(e)) });
    control = new ControlServer({ keys, latestFrame: () => frame && { ...frame, data: Buffer.from(frame.data) }, tmpDir: data });
  });
  after(async () => {
    await control.close();
    await pack.cleanup();
    await rm(data, { recursive: true, force: true });
  });
  beforeEach(() => {
    events = [];
    frame = { data: rgb, width: W, height: H, seq: 1, at: Date.now() };
  });

  const runner = new ProcessTestRunner({ killGraceSecs: 2, maxOutputBytes: 1 << 20, version: 'test' });

  /** One test case through the runner, with the control channel's env; returns the outcome and the result folder. */
  async function run(fn: string): Promise<{ outcome: RunOutcome; dir: string }> {
    const dir = path.join(data, 'results', String(++runs));
    await mkdir(dir, { recursive: true });
    const channel = await control.open({ resultDir: dir, testPackSha: sha, remote: 'porch' });
    try {
      const spec = { resultDir: dir, checkoutDir, testCase: `tests/api.py::${fn}`, testPackSha: sha, config: {}, timeoutSecs: 30, env: channel.env, control: channel };
      return { outcome: await runner.run(spec, new AbortController().signal), dir };
    } finally {
      await channel.close();
    }
  }
  const json = async (dir: string, name: string) => JSON.parse(await readFile(path.join(dir, name), 'utf8')) as Record<string, unknown>;
  /** The frame's pixel at (x, y) in BGR order. */
  const bgr = (x: number, y: number) => [...rgb.subarray((y * W + x) * 3, (y * W + x) * 3 + 3)].reverse();

  it('press and press_and_hold reach the IR transport as LircEncoder.sendOnce trains', async () => {
    const { outcome } = await run('test_press');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
    const ref = new LircEncoder(parseLircConfig(REMOTE, 'porch.lircd.conf')[0]!);
    const reps = repeatsFor(ref.remote, 'KEY_UP', 500);
    expect(reps).to.equal(4);
    expect(events.map((e) => e.key)).to.deep.equal([{ remote: 'porch', key: 'KEY_OK' }, { remote: 'porch', key: 'KEY_UP' }]);
    expect(events[0]!.trains).to.deep.equal(ref.sendOnce('KEY_OK'));
    expect(events[1]!.trains).to.deep.equal(ref.sendOnce('KEY_UP', reps));
  });

  it('the run log has a line for each key press (key, remote, transport) stamped with the run clock, between the test\'s own lines', async () => {
    const { outcome, dir } = await run('test_press_logged');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
    const log = (await readFile(path.join(dir, 'farmhand.log'), 'utf8')).split('\n').filter(Boolean);
    const texts = log.map((l) => l.slice(l.indexOf(' ') + 1));
    const at = (t: string) => texts.findIndex((x) => x.startsWith(t));
    expect(texts).to.include('press KEY_OK remote=porch transport=virtual:');
    expect(texts).to.include('press key_up (hold 500 ms) remote=porch transport=virtual:');
    expect(texts.some((t) => /^press KEY_NOPE remote=porch transport=virtual:: failed: not_found: /.test(t)), texts.join('\n')).to.equal(true);
    // Logged as the press starts, so before what the test prints once the press returned; same clock as its output.
    expect(at('press KEY_OK')).to.be.below(at('between'));
    expect(at('press key_up')).to.be.below(at('after'));
    const stamps = log.map((l) => l.slice(0, l.indexOf(' ')));
    expect([...stamps].sort()).to.deep.equal(stamps);
  });

  it('the run log has a line for each match and wait_for_match: template, result, confidence', async () => {
    const found = await run('test_match');
    expect(found.outcome.result, found.outcome.traceback ?? '').to.equal('pass');
    const log = await readFile(path.join(found.dir, 'farmhand.log'), 'utf8');
    expect(log).to.match(/ wait_for_match images\/patch\.png: matched \(confidence 1\.000, threshold 0\.9, at Region\(x=201, y=113, .*\)\) after \d+\.\d{3} s\n/);
    // A failed match saves the frame searched and the template as artifacts (the result page shows them).
    expect(log).to.match(/ match images\/patch\.png: no match \(confidence -?\d\.\d{3}, threshold 0\.9, at Region\(.*\)\); saved match-failures\/001-frame\.png match-failures\/001-template\.png\n/);
    expect((await readdir(path.join(found.dir, 'match-failures'))).sort()).to.deep.equal(['001-frame.png', '001-template.png']);
    const absent = await run('test_match_absent');
    expect(absent.outcome.result).to.equal('fail');
    expect(await readFile(path.join(absent.dir, 'farmhand.log'), 'utf8')).to.match(
      / wait_for_match images\/absent\.png: timed out after 0\.5 s, best no match \(confidence -?\d\.\d{3}, threshold 0\.9, at Region\(.*\)\); saved match-failures\/001-frame\.png match-failures\/001-template\.png\n/,
    );
    expect((await readdir(path.join(absent.dir, 'match-failures'))).sort()).to.deep.equal(['001-frame.png', '001-template.png']);
  });

  it('an unknown key is an error outcome (ControlError not_found), not a failure', async () => {
    const { outcome } = await run('test_unknown_key');
    expect(outcome.result).to.equal('error');
    expect(outcome.failure_reason).to.match(/^ControlError: .*KEY_NOPE/);
    expect(events).to.have.length(0);
  });

  it('get_frame returns a height x width x 3 uint8 numpy array with the exact pixels in BGR order', async () => {
    const { outcome, dir } = await run('test_get_frame');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
    const out = await json(dir, 'frame.json');
    expect(out).to.deep.include({ type: 'ndarray', shape: [H, W, 3], dtype: 'uint8' });
    expect(out.pixels).to.deep.equal(PIXELS.map(([x, y]) => bgr(x, y)));
  });

  it('get_frame while capture is offline is an error outcome (device_unavailable)', async () => {
    frame = undefined;
    const { outcome } = await run('test_get_frame');
    expect(outcome.result).to.equal('error');
    expect(outcome.failure_reason).to.match(/^ControlError: capture is offline/);
  });

  it('match / wait_for_match find a template cut out of the frame where it was cut, not outside a region', async () => {
    const { outcome, dir } = await run('test_match');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
    const out = await json(dir, 'match.json');
    expect(out.match).to.equal(true);
    expect(out.region).to.deep.equal([PATCH.x, PATCH.y, PATCH.width, PATCH.height]);
    expect(out.confidence).to.be.above(0.99);
    expect(out.outside).to.equal(false);
    expect(out.outside_confidence).to.be.below(0.5);
  });

  it('wait_for_match of an absent template raises MatchTimeout: the outcome is fail, not error', async () => {
    const { outcome, dir } = await run('test_match_absent');
    expect(outcome.result).to.equal('fail');
    expect(outcome.failure_reason).to.match(/^MatchTimeout: no match for images\/absent\.png within 0\.5 s \(best confidence /);
    // It waited its 0.5 s before giving up: the run's own recorded duration (a timer never fires early).
    expect(Number(await readFile(path.join(dir, 'duration'), 'utf8'))).to.be.at.least(0.5);
  });

  it('is_screen_black: true on a black frame, false on a picture', async () => {
    frame = { data: Buffer.alloc(W * H * 3, 12), width: W, height: H };
    expect((await run('test_black')).outcome.result).to.equal('pass');
    frame = { data: rgb, width: W, height: H };
    const pic = await run('test_black');
    expect(pic.outcome).to.deep.include({ result: 'fail', failure_reason: 'AssertionError: the screen is not black' });
  });

  it('save_frame writes a PNG artifact (sub-folder created) with the frame\'s exact pixels', async () => {
    const { outcome, dir } = await run('test_save_frame');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
    const img = await sharp(path.join(dir, 'shots/frame.png')).raw().toBuffer({ resolveWithObject: true });
    expect([img.info.width, img.info.height, img.info.channels]).to.deep.equal([W, H, 3]);
    expect(img.data.equals(rgb)).to.equal(true);
  });

  it('without numpy and cv2: get_frame gives a Frame (BGR pixels), save_frame writes a PNG with its own writer', async () => {
    const { outcome, dir } = await run('test_without_numpy');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
    const out = await json(dir, 'frame.json');
    expect(out).to.deep.include({ size: [W, H], black: false });
    expect(out.pixels).to.deep.equal(PIXELS.map(([x, y]) => bgr(x, y)));
    const img = await sharp(path.join(dir, 'plain.png')).raw().toBuffer({ resolveWithObject: true });
    expect(img.data.equals(rgb)).to.equal(true);
  });

  it('wait_until returns the first truthy value, else the last falsy one after the timeout', async () => {
    const { outcome } = await run('test_wait_until');
    expect(outcome.result, outcome.traceback ?? '').to.equal('pass');
  });
});
