/**
 * End to end on the virtual set-top box: the example test pack runs through
 * the API with the daemon's real parts - capture through ffmpeg (virtual:),
 * key presses through the LIRC encoder and the IR path (virtual:), python3
 * test scripts with template matching - and one test fails on purpose.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { asUser } from '../helpers/auth.js';
import { expectError } from '../helpers/errors.js';
import { waitFor } from '../helpers/wait.js';
import { packFromFolder, type TestPackRepo } from '../fixtures/testPack.js';

const exec = promisify(execFile);

/** The example pack as a git repository, the way scripts/demo.sh makes it. */
function examplePack(): Promise<TestPackRepo> {
  return packFromFolder('examples/test-pack');
}

describe('the example test pack on the virtual set-top box', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let pack: TestPackRepo;

  before(async () => {
    pack = await examplePack();
    d = await startTestDaemon({ pack, config: { capture: { uri: 'virtual:', width: 1280, height: 720, fps: 25, preview_fps: 10, record_video: true }, ir: { uri: 'virtual:' } } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
    await pack?.cleanup();
  });

  it('runs the menu tests: they pass, and test_menu_wraps_around fails on purpose with its screenshot', async () => {
    const names = (await d.http.get('/api/v1/test_pack/main/test_case_names')).body as string[];
    const menus = names.filter((n) => n.startsWith('tests/menus.py::'));
    expect(menus).to.include('tests/menus.py::test_menu_wraps_around');
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: menus });
    expect(res.status, res.text).to.equal(200);
    const job = await waitForJob(d, res.body.job_uid, 150_000);
    const results = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    const byName = Object.fromEntries(results.map((r) => [r.test_case, r]));
    for (const name of menus) {
      const expected = name.endsWith('::test_menu_wraps_around') ? 'fail' : 'pass';
      expect(byName[name]?.result, `${name}: ${byName[name]?.failure_reason}`).to.equal(expected);
    }
    expect(job.result_counts).to.deep.equal({ pass: menus.length - 1, fail: 1, error: 0, total: menus.length });
    const failed = byName['tests/menus.py::test_menu_wraps_around']!;
    expect(failed.failure_reason).to.match(/^MatchTimeout: /);
    // The run log says what the test did, to read the video against: presses and matches, with their times.
    const runLog = (await d.http.get(`/api/v1/result${failed.result_id}/farmhand.log`)).text;
    expect(runLog).to.match(/^\S+ press KEY_MENU remote=\S+ transport=virtual:$/m);
    expect(runLog).to.match(/^\S+ wait_for_match images\/\S+\.png: (matched|timed out).*confidence -?\d\.\d{3}/m);
    const shot = await d.http.get(`/api/v1/result${failed.result_id}/screenshot.png`).buffer(true);
    expect(shot.status).to.equal(200);
    expect(await sharp(shot.body as Buffer).metadata()).to.include({ width: 1280, height: 720, format: 'png' });

    // A playable H.264 video of the whole run.
    const listing = (await d.http.get(`/api/v1/result${failed.result_id}/artifacts/`)).body as Record<string, { size: number }>;
    expect(listing).to.have.property('video.mp4');
    const video = path.join(d.daemon.services.results.dirOf(failed.result_id), 'video.mp4');
    const probe = JSON.parse(
      (await exec('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=codec_name,width,height:format=duration', '-of', 'json', video])).stdout,
    ) as { streams: Array<{ codec_name: string; width: number }>; format: { duration: string } };
    expect(probe.streams[0]).to.include({ codec_name: 'h264', width: 1280 });
    // The clip begins after the run's recorded start and ends before its recorded end (the end is taken once the
    // video is cut), so whatever the machine's speed the video is at most the run plus what the recorder adds: the
    // clip's margins (0.15 s before, 0.25 s after), its start rounded down to a segment's keyframe (1 s segments) and
    // the stream clock's error (about 0.1 s). It is at least the run minus what the run's recorded times hold
    // besides the test's moments on screen: the time to cut the clip after the test ended (waiting for the segment
    // holding the end to close: at most one segment plus the recorder's 4 s wait) is inside the run but not
    // necessarily in the video. Video time follows wall time even when the virtual box renders fewer frames than 25
    // a second (the raw input is stamped by the wall clock), so a loaded machine has no shorter video.
    const runSecs = (Date.parse(failed.end_time) - Date.parse(failed.start_time)) / 1000;
    const SEGMENT_SECS = 1;
    const FINISH_WAIT_SECS = 4;
    const videoSecs = Number(probe.format.duration);
    expect(videoSecs, `video ${videoSecs} s for a run of ${runSecs} s`)
      .to.be.at.least(runSecs - SEGMENT_SECS - FINISH_WAIT_SECS - 0.25)
      .and.at.most(runSecs + 0.15 + 0.25 + SEGMENT_SECS + 0.1);
    // Decodable from its first frame to its last.
    await exec('ffmpeg', ['-v', 'error', '-xerror', '-i', video, '-f', 'null', '-']);
    const mp4 = await d.http.get(`/api/v1/result${failed.result_id}/artifacts/video.mp4`).set('Range', 'bytes=0-99').buffer(true);
    expect(mp4.status).to.equal(206);
    expect(mp4.type).to.equal('video/mp4');
  });

  it('POST /api/v2/nodes/{node_id}/press goes through the same IR path: the picture changes', async () => {
    const as = await asUser(d, 'carol');
    const shot = async () => sharp((await as.get('/api/v2/nodes/farmhand-test/screenshot.png').buffer(true)).body as Buffer).raw().toBuffer();
    const before = await shot();
    // Apart from the clock (top right), the menu focus moved: wait for the picture to show it.
    const changedSince = (after: Buffer) => {
      let changed = 0;
      for (let y = 100; y < 720; y += 4) for (let x = 0; x < 1280; x += 4) if (before[(y * 1280 + x) * 3] !== after[(y * 1280 + x) * 3]) changed++;
      return changed;
    };
    const res = await as.post('/api/v2/nodes/farmhand-test/press').send({ key: 'KEY_DOWN' });
    expect(res.status, res.text).to.equal(204);
    await waitFor(async () => changedSince(await shot()) > 100, 'the menu focus to move on the screenshot');
    expectError(await as.post('/api/v2/nodes/farmhand-test/press').send({ key: 'KEY_NOPE' }), 404, 'not_found');
    expectError(await as.post('/api/v2/nodes/farmhand-test/press').send({}), 400, 'invalid_request');
    expectError(await as.post('/api/v2/nodes/farmhand-test/press').send({ key: 'KEY_OK', remote_control: 'nope' }), 400, 'invalid_request');
  });

  it('runs the test written against stbt (tests/stbt_menus.py): it passes, and its log shows its stbt calls', async () => {
    const name = 'tests/stbt_menus.py::test_open_guide_with_stbt';
    const names = (await d.http.get('/api/v1/test_pack/main/test_case_names')).body as string[];
    expect(names).to.include(name);
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [name] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 150_000);
    const [r] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    expect(r!.result, r!.failure_reason).to.equal('pass');
    const runLog = (await d.http.get(`/api/v1/result${r!.result_id}/farmhand.log`)).text;
    expect(runLog).to.match(/^\S+ press KEY_OK remote=vstb transport=virtual:$/m);
    expect(runLog).to.match(/^\S+ wait_for_match \S*title-guide\.png matched/m);
    expect(runLog).to.match(/^\S+ draw_text: the guide is open: its title is at Region\(/m);
  });
});
