/**
 * The truth of transition timings: a pack (test/fixtures/timing-pack) runs
 * through the daemon on the virtual set-top box with its animations on
 * (`capture.virtual_animations`: channel-change black, a menu slide, a
 * spinner), measuring each key with `stbt.press_and_wait`. The box numbers
 * every frame it writes and records which frames changed its picture; the
 * frames the Transition reports as the start and the end of each animation
 * must be the box's own (within one frame), with recording on and off.
 * Frames, not seconds: capture and recording add a latency that a loaded
 * machine makes vary, but never change which frame a picture first appeared in.
 */
import { expect } from 'chai';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BLACK_MS, VSTB_LIRCD_CONF, VSTB_REMOTE_FILE, type KeyRecord, type PictureChange } from '../../src/hardware/virtual/index.js';
import { packFromFolder, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';

const CASE = 'tests/test_timing.py::test_transitions';
const KEYS = ['KEY_OK', 'KEY_CHANNELUP', 'KEY_MENU', 'KEY_DOWN', 'KEY_DOWN', 'KEY_DOWN', 'KEY_OK', 'KEY_OK'];
const ANIMATIONS = ['black', 'black', undefined, undefined, undefined, undefined, 'slide', 'spinner'];

interface Reported {
  key: string;
  status: string;
  start_mark: number;
  end_mark: number;
  duration: number;
  animation_duration: number;
}

function timingPack(): Promise<TestPackRepo> {
  return packFromFolder('test/fixtures/timing-pack', async (dir) => {
    await mkdir(path.join(dir, 'config', 'remote-control'), { recursive: true });
    await writeFile(path.join(dir, VSTB_REMOTE_FILE), VSTB_LIRCD_CONF);
  });
}

/** The box's truth for the key at `i` of the run's keys: the first and the last changed frame before the next key. */
function truthOf(keys: KeyRecord[], changes: PictureChange[], i: number): { start: PictureChange; end: PictureChange } {
  const from = keys[i]!.mark;
  const to = keys[i + 1]?.mark ?? Infinity;
  const mine = changes.filter((c) => c.mark > from && c.mark <= to);
  expect(mine.length, `no picture change after ${keys[i]!.key}`).to.be.greaterThan(0);
  return { start: mine[0]!, end: mine[mine.length - 1]! };
}

for (const recording of [false, true]) {
  describe(`transition timings against the virtual box's truth (recording ${recording ? 'on' : 'off'})`, function () {
    this.timeout(300_000);
    let d: TestDaemon;
    let pack: TestPackRepo;

    before(async () => {
      pack = await timingPack();
      d = await startTestDaemon({
        pack,
        config: { capture: { uri: 'virtual:', width: 640, height: 360, fps: 25, preview_fps: 25, record_video: recording, virtual_animations: true }, ir: { uri: 'virtual:' } },
      });
      await waitOnline(d);
    });
    after(async () => {
      await d?.stop();
      await pack?.cleanup();
    });

    it('press_and_wait reports the frames where the box started and finished changing its picture', async () => {
      const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [CASE] });
      expect(res.status, res.text).to.equal(200);
      await waitForJob(d, res.body.job_uid, 280_000);
      const [result] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
      const artifact = (name: string) => d.http.get(`/api/v1/result${result!.result_id}/artifacts/${name}`);
      expect(result!.result, `${result!.failure_reason}\n${(await artifact('stdout.log')).text}`).to.equal('pass');
      const reported = JSON.parse((await artifact('timings.json')).text) as Reported[];
      expect(reported.map((r) => r.key)).to.deep.equal(KEYS);

      const truth = d.daemon.virtualStb!.truth()!;
      const keys = truth.keys;
      expect(keys.map((k) => k.key)).to.deep.equal(KEYS);
      expect(keys.map((k) => k.animation)).to.deep.equal(ANIMATIONS);
      const rows: string[] = [];
      reported.forEach((r, i) => {
        const t = truthOf(keys, truth.changes, i);
        rows.push(`${r.key}: start frame ${r.start_mark} (box ${t.start.mark}), end frame ${r.end_mark} (box ${t.end.mark}), ` +
          `duration ${r.duration.toFixed(3)} s, animation ${r.animation_duration.toFixed(3)} s (box ${((t.end.at - t.start.at) / 1000).toFixed(3)} s)`);
        expect(r.status).to.equal('COMPLETE');
        expect(r.start_mark, rows.join('\n')).to.be.greaterThan(keys[i]!.mark);
        expect(Math.abs(r.start_mark - t.start.mark), rows.join('\n')).to.be.at.most(1);
        expect(Math.abs(r.end_mark - t.end.mark), rows.join('\n')).to.be.at.most(1);
      });
      // The box's own record: the channel came no sooner than the black's length after the key.
      expect(truthOf(keys, truth.changes, 1).end.at - keys[1]!.at).to.be.at.least(BLACK_MS);
      console.log(`      ${rows.join('\n      ')}`);
    });
  });
}
