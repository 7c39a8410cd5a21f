/**
 * Network video through the real pipeline: a real ffmpeg sender on loopback (udp://, srt://, http://)
 * stands in for an HDMI-over-IP encoder. The capture comes online, frames have the configured size
 * whatever the stream's, and an encoder that restarts at another resolution is reported offline (as
 * an unplugged card) and then online again by itself. Unreachable streams end with a clear reason,
 * never a hang, and credentials in the URI appear nowhere.
 */
import { expect } from 'chai';
import { FfmpegFrameSource, type FfmpegFrameSourceOptions } from '../../src/hardware/capture/index.js';
import { configSchema } from '../../src/config/schema.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { capturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';
import { MiniRtspServer } from './network-capture-rtsp.js';
import { freePort, portKind, senderUrls, startSender, type Sender, type SenderProtocol } from './network-capture-lib.js';

const W = 320;
const H = 240;
/** The centre pixel's first byte (red) in an rgb24 frame of W x H; +2 is its blue. */
const centre = ((H >> 1) * W + (W >> 1)) * 3;
const base: Omit<FfmpegFrameSourceOptions, 'uri'> = { width: W, height: H, fps: 25, preview_fps: 10, ffmpeg: 'ffmpeg' };

describe('capture: network video (udp, srt, http) from a real ffmpeg sender', function () {
  this.timeout(60_000);
  let source: FfmpegFrameSource | undefined;
  let sender: Sender | undefined;
  let rtsp: MiniRtspServer | undefined;
  afterEach(async () => {
    await source?.stop();
    await sender?.kill();
    await rtsp?.close();
    source = sender = rtsp = undefined;
  });

  for (const protocol of ['udp', 'srt', 'http'] as const) {
    it(`${protocol}://: online with frames at the configured size; a sender restarted at another size is offline, then online again`, async () => {
      const urls = senderUrls(protocol, await freePort(portKind(protocol)));
      sender = startSender(urls.send, 640, 360, urls.outputArgs);
      source = new FfmpegFrameSource({ ...base, uri: urls.read });
      await source.start();
      await waitFor(() => source!.health().online, { what: `${protocol} capture online (sender: ${sender.stderr()})`, timeoutMs: 20_000 });
      const first = source.latestFrame()!;
      expect([first.width, first.height, first.data.length]).to.deep.equal([W, H, W * H * 3]);

      await sender.kill();
      await waitFor(() => !source!.health().online, { what: 'offline after the sender died', timeoutMs: 15_000 });
      expect(source.health().reason).to.match(offlineReason(protocol));
      expect(source.latestFrame(), 'no stale frame served while offline').to.equal(undefined);

      sender = startSender(urls.send, 480, 270, urls.outputArgs);
      await waitFor(() => source!.health().online, { what: `online again (sender: ${sender.stderr()})`, timeoutMs: 20_000 });
      const again = await waitFor(() => source!.latestFrame(), 'a frame of the new stream');
      expect([again.width, again.height, again.data.length]).to.deep.equal([W, H, W * H * 3]);
      expect(again.seq).to.be.above(first.seq);
      expect(source.losses().count).to.be.at.least(1);
    });
  }

  it('rtsp:// (a minimal RTSP server relaying an ffmpeg RTP sender): online, then an encoder reboot is offline and online again', async () => {
    rtsp = new MiniRtspServer();
    await rtsp.start();
    sender = rtsp.startSender(640, 360, 'red');
    source = new FfmpegFrameSource({ ...base, uri: rtsp.uri('viewer:pw@') });
    await source.start();
    await waitFor(() => source!.health().online, { what: `rtsp capture online (sender: ${sender.stderr()})`, timeoutMs: 20_000 });
    const first = source.latestFrame()!;
    expect([first.width, first.height]).to.deep.equal([W, H]);
    expect(first.data[centre]).to.be.above(180); // red

    await sender.kill();
    rtsp.restart();
    await waitFor(() => !source!.health().online, { what: 'offline after the encoder rebooted', timeoutMs: 15_000 });
    expect(source.health().reason).to.match(/rtsp:\/\/\*\*\*@127\.0\.0\.1:\d+\/live/);
    sender = rtsp.startSender(480, 270, 'blue');
    const blue = await waitFor(() => {
      const f = source!.latestFrame();
      return f && f.data[centre + 2]! > 180 ? f : undefined;
    }, { what: `the new stream's blue frames (sender: ${sender.stderr()})`, timeoutMs: 20_000 });
    expect([blue.width, blue.height, blue.data.length]).to.deep.equal([W, H, W * H * 3]);
  });

  it('udp://: a sender that restarts at another size without a pause keeps frames at the configured size', async () => {
    const urls = senderUrls('udp', await freePort('udp'));
    sender = startSender(urls.send, 640, 360);
    source = new FfmpegFrameSource({ ...base, uri: urls.read });
    await source.start();
    await waitFor(() => source!.health().online, { what: 'online', timeoutMs: 20_000 });
    await sender.kill();
    sender = startSender(urls.send, 1280, 720);
    const before = source.stats().framesReceived;
    // Frames of the new stream: well past the old one's last (it ended before `before` was read).
    await waitFor(() => source!.stats().framesReceived > before + 20, { what: 'frames of the restarted stream', timeoutMs: 20_000 });
    const frame = await waitFor(() => source!.latestFrame(), 'a frame');
    expect([frame.width, frame.height, frame.data.length]).to.deep.equal([W, H, W * H * 3]);
  });
});

/** What health says while the sender is gone (ffmpeg's own timeout, or the stream's end, or the retry failing). */
function offlineReason(protocol: SenderProtocol): RegExp {
  if (protocol === 'udp') return /no data from udp:\/\/127\.0\.0\.1:\d+ for 1 s/;
  return /stream ended|Connection refused|failed|Input\/output error/;
}

describe('capture: network URIs that cannot work end with a clear reason, never a hang', function () {
  this.timeout(30_000);
  let source: FfmpegFrameSource | undefined;
  afterEach(async () => {
    await source?.stop();
    source = undefined;
  });

  const cases: Array<[string, (port: number) => string, RegExp]> = [
    ['rtsp:// to a closed port', (p) => `rtsp://127.0.0.1:${p}/stream`, /Connection refused/],
    ['http:// to a closed port', (p) => `http://127.0.0.1:${p}/live.ts`, /Connection refused/],
    ['http:// to a host that does not resolve', () => 'http://no-such-encoder.invalid/live.ts', /Failed to resolve hostname no-such-encoder\.invalid/],
    ['srt:// to nobody', (p) => `srt://127.0.0.1:${p}`, /srt:\/\/127\.0\.0\.1:\d+: Connection timed out|Connection to srt:\/\/127\.0\.0\.1:\d+ failed/],
    ['udp:// with no sender', (p) => `udp://127.0.0.1:${p}`, /no data from udp:\/\/127\.0\.0\.1:\d+ for 1 s/],
  ];
  for (const [what, uri, reason] of cases) {
    it(`${what}: offline, with the reason, and retried`, async () => {
      source = new FfmpegFrameSource({ ...base, uri: uri(await freePort(what.startsWith('http') || what.startsWith('rtsp') ? 'tcp' : 'udp')) });
      await source.start();
      await waitFor(() => source!.losses().count >= 1, { what: 'the first attempt to end', timeoutMs: 20_000 });
      expect(source.health().online).to.equal(false);
      expect(source.losses().reason).to.match(reason);
      expect(source.health().reason).to.match(reason);
      await waitFor(() => source!.stats().restarts >= 1, { what: 'a retry', timeoutMs: 20_000 });
    });
  }

  it("credentials in the URI appear in no log line, health reason or the command shown (rtsp://user:password@)", async () => {
    const log = capturingLogger();
    source = new FfmpegFrameSource({ ...base, uri: `rtsp://operator:s3cret-pw@127.0.0.1:${await freePort('tcp')}/live`, logger: log });
    await source.start();
    await waitFor(() => source!.losses().count >= 1, { what: 'the first attempt to end', timeoutMs: 20_000 });
    expect(source.health().reason).to.match(/rtsp:\/\/\*\*\*@127\.0\.0\.1:\d+\/live: Connection refused/);
    expect(source.commandArgs().join(' ')).to.include('rtsp://***@127.0.0.1');
    expect(log.text()).to.include('Connection refused'); // ffmpeg's lines were logged...
    expect(log.text()).to.not.include('s3cret-pw'); // ...without the password
    expect(log.text()).to.not.include('operator:');
  });

  it('a malformed capture.uri is refused when the configuration loads, saying what to write', () => {
    const bad: Array<[string, RegExp]> = [
      ['udp://127.0.0.1', /udp:\/\/ needs a port/],
      ['srt://user:pw@host:9000', /srt:\/\/ takes no user:password@/],
      ['rtsp://', /not a valid URI|needs a host/],
      ['http://cam/live stream', /spaces or control characters/],
      ['rtmp://cam/live', /unknown capture\.uri; use one of: .*udp:\/\/host:port/],
    ];
    for (const [uri, message] of bad) {
      const r = configSchema.safeParse({ capture: { uri } });
      expect(r.success, uri).to.equal(false);
      const text = r.success ? '' : r.error.issues.map((i) => i.message).join('; ');
      expect(text, uri).to.match(message);
      expect(text, uri).to.not.include(':pw@');
    }
  });
});

describe('daemon: capture.uri udp:// fed by a real ffmpeg', function () {
  this.timeout(90_000);
  let d: TestDaemon | undefined;
  let sender: Sender | undefined;
  after(async () => {
    await sender?.kill();
    await d?.stop();
  });

  it('the node is online with screenshots at the configured size; a restarted encoder takes it offline and back', async () => {
    const urls = senderUrls('udp', await freePort('udp'));
    sender = startSender(urls.send, 640, 360);
    d = await startTestDaemon({ config: { capture: { uri: urls.read, width: W, height: H, preview_fps: 10, first_frame_wait_secs: 20 } } });
    const as = await asUser(d, 'carol');
    const node = async () => (await as.get('/api/v2/nodes/farmhand-test')).body as { online: boolean; available: boolean; not_available_reason: string | null };
    const size = async () => {
      const png = (await as.get('/api/v2/nodes/farmhand-test/screenshot.png').buffer(true)).body as Buffer;
      return [png.readUInt32BE(16), png.readUInt32BE(20)];
    };
    await waitFor(async () => (await node()).available, { what: 'the node available', timeoutMs: 30_000 });
    expect(await size()).to.deep.equal([W, H]);

    await sender.kill();
    const offline = await waitFor(async () => {
      const n = await node();
      return n.available ? undefined : n;
    }, { what: 'the node unavailable after the sender died', timeoutMs: 20_000 });
    expect(offline.not_available_reason).to.match(/capture|udp|offline/i);
    expect((await as.get('/api/v2/nodes/farmhand-test/screenshot.png')).status).to.equal(503);

    sender = startSender(urls.send, 800, 448);
    await waitFor(async () => (await node()).available, { what: 'the node available again', timeoutMs: 30_000 });
    expect(await size()).to.deep.equal([W, H]);
  });
});
