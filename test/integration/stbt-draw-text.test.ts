/**
 * stbt.draw_text end to end: a real daemon on the virtual set-top box (720p25, recording on, as shipped) runs
 * a test that calls draw_text("FARMHAND 42"). The job's video shows the text from some time after it starts, on
 * every frame from then (frames decoded twice a second and read with tesseract), and the frames the script itself grabbed do not (stb-tester's
 * frames are unmarked too). When the run ends its texts leave the video.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const exec = promisify(execFile);

const TEST = [
  'import json, time',
  'import stbt_core as stbt',
  '',
  'def test_draw_text():',
  '    before = time.time()',
  '    stbt.draw_text("FARMHAND 42", duration_secs=60)',
  '    # When the call was made and when it returned (the text is on the video then), on the machine\'s clock.',
  '    with open("draw-times.json", "w") as f:',
  '        json.dump({"before": before, "after": time.time()}, f)',
  '    # The frames the script sees after the call: three of its next 21, saved for the test to read (they must not',
  '    # show the text). Counted, not timed: on a loaded machine a slow loop gets fewer frames a second.',
  '    for n, frame in enumerate(stbt.frames(timeout_secs=120)):',
  '        if n % 10 == 0:',
  '            stbt.save_frame(frame, "script-frame-%03d.png" % n)',
  '        if n == 20:',
  '            break',
  '',
].join('\n');

/** How many frames a second of the run's video are read. */
const SAMPLES_PER_SEC = 2;

/** The run's video, SAMPLES_PER_SEC frames a second from its first (ffmpeg's fps filter), as PNGs in order. */
async function videoSamples(video: string, tmp: string): Promise<Buffer[]> {
  const out = await mkdtemp(path.join(tmp, 'samples-'));
  await exec('ffmpeg', ['-v', 'error', '-i', video, '-vf', `fps=${SAMPLES_PER_SEC}:round=down`, path.join(out, '%04d.png')]);
  const names = (await readdir(out)).sort();
  return Promise.all(names.map((n) => readFile(path.join(out, n))));
}

/** The top left of a 1280x720 picture (where the texts are drawn), magnified for tesseract; its text. */
async function ocrTopLeft(png: Buffer, tmp: string, name: string): Promise<string> {
  const crop = await sharp(png).extract({ left: 0, top: 0, width: 640, height: 120 }).resize({ width: 1280 }).png().toBuffer();
  const file = path.join(tmp, `${name}.png`);
  await writeFile(file, crop);
  return (await exec('tesseract', [file, 'stdout', '--psm', '6'])).stdout;
}

describe('stbt.draw_text on the virtual set-top box', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let pack: TestPackRepo;
  let tmp: string;

  before(async () => {
    pack = await makeTestPack({ 'tests/draw.py': TEST });
    tmp = await mkdtemp(path.join(os.tmpdir(), 'farmhand-draw-text-'));
    d = await startTestDaemon({ pack, config: { capture: { uri: 'virtual:', width: 1280, height: 720, fps: 25, preview_fps: 10, record_video: true } } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
    await pack?.cleanup();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('the recorded video shows the text from the call on; the frames the script grabbed do not; it goes with the run', async () => {
    // A loaded machine may stall the capture for a moment (the node is offline, 503): ask again once it is back.
    const res = await waitFor(async () => {
      await waitOnline(d, 60_000);
      const r = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/draw.py::test_draw_text'] });
      return r.status === 503 ? undefined : r;
    }, { what: 'the job to be taken', timeoutMs: 120_000 });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 150_000);
    const [result] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    expect(result!.result, result!.failure_reason).to.equal('pass');
    const dir = d.daemon.services.results.dirOf(result!.result_id!);

    // The run log has the call's line, as before draw_text drew.
    const log = await readFile(path.join(dir, 'farmhand.log'), 'utf8');
    expect(log).to.match(/^\S+ draw_text: FARMHAND 42 \(for 60 s\)$/m);
    // The call's times in video time (video.json: the wall-clock time of the video's first frame).
    const times = JSON.parse(await readFile(path.join(dir, 'draw-times.json'), 'utf8')) as { before: number; after: number };
    const video = JSON.parse(await readFile(path.join(dir, 'video.json'), 'utf8')) as { start_time: string };
    const [before, after] = [times.before, times.after].map((t) => t - Date.parse(video.start_time) / 1000) as [number, number];
    expect(after, `draw_text returned at ${times.after}, video from ${video.start_time}`).to.be.at.least(0);

    // The video sampled twice a second, from its first frame (the job's start, before the script ran) to its last
    // (the run's end). Where the text first shows is not asserted against the call's time: the video's clock maps
    // a time a little late, never early (stream-clock.ts), and on a machine loaded by other work the error has
    // exceeded a second, so one frame a second after the call can be from before it.
    const samples = await videoSamples(path.join(dir, 'video.mp4'), tmp);
    const shown = [] as number[];
    for (const [i, png] of samples.entries()) if ((await ocrTopLeft(png, tmp, `video-${i}`)).includes('FARMHAND 42')) shown.push(i);
    const at = (i: number) => `${(i / SAMPLES_PER_SEC).toFixed(1)} s`;
    expect(shown, `samples of ${samples.length}`).to.not.be.empty;
    // From the first frame with the text on, every frame has it until the last (drawn for 60 s, not flickering).
    const [first, last] = [shown[0]!, shown.at(-1)!];
    expect(shown, `the text on from ${at(first)} to ${at(last)}`).to.have.length(last - first + 1);
    // Before the call the video has no text there: its first frame, when the call came a second and more after it
    // (the clock's error only makes `before` look earlier than it was).
    if (before >= 1) expect(first, `the text on at ${at(first)}, the call at ${before.toFixed(1)} s`).to.be.above(0);

    // The script's own frames, grabbed after the call while the text was on the video: unmarked.
    const saved = (await readdir(dir)).filter((f) => /^script-frame-\d+\.png$/.test(f));
    expect(saved).to.have.length(3);
    for (const f of saved) {
      const text = await ocrTopLeft(await readFile(path.join(dir, f)), tmp, f);
      expect(text, f).to.not.contain('FARMHAND');
    }

    // The run is over: its 60 s text is no longer drawn (the overlay's file is empty).
    const frames = d.daemon.services.frames;
    expect(frames).to.be.instanceOf(FfmpegFrameSource);
    expect((frames as FfmpegFrameSource).overlayLines()).to.deep.equal([]);
    expect(await readFile(path.join(d.dataDir, 'capture', 'draw-text.txt'), 'utf8')).to.equal('');
  });
});
