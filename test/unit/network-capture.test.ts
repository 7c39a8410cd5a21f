/** Network video: the capture.uri grammar, ffmpeg's input arguments, redaction, exit reasons, the restart schedule. */
import { expect } from 'chai';
import { captureUri, parseNetworkCaptureUri, redactCaptureUri } from '../../src/config/uris/capture.js';
import { Backoff } from '../../src/hardware/capture/backoff.js';
import { ffmpegArgs, inputArgs, recordOutput } from '../../src/hardware/capture/ffmpeg-args.js';
import { NETWORK_BACKOFF, networkExitReason, networkInputArgs } from '../../src/hardware/capture/network-input.js';

const size = { width: 1280, height: 720, fps: 25 };
const failed = (code: number) => ({ code, signal: null });

describe('capture.uri: network forms', () => {
  it('accepts udp, srt, rtsp, http and https as encoders publish them', () => {
    for (const uri of [
      'udp://239.0.0.1:5000', 'udp://@239.0.0.1:5000?localaddr=10.0.0.2', 'udp://[::1]:5000', 'srt://10.0.0.5:9000?latency=50000',
      'srt://0.0.0.0:9000?mode=listener&passphrase=0123456789', 'rtsp://encoder.lab/stream1', 'rtsp://admin:pw@10.0.0.7:8554/live',
      'http://10.0.0.8/live.ts', 'https://user:pw@enc.lab:8443/video.mjpg', 'testsrc:', 'v4l2:/dev/video0', 'virtual:', 'none:',
    ]) expect(captureUri.safeParse(uri).success, uri).to.equal(true);
  });

  it('refuses what cannot work, saying what to write, without the credentials', () => {
    const cases: Array<[string, RegExp]> = [
      ['udp://239.0.0.1', /udp:\/\/ needs a port, e\.g\. udp:\/\/239\.0\.0\.1:5000/],
      ['srt://host', /srt:\/\/ needs a port/],
      ['udp://u:secret@h:5000', /udp:\/\/ takes no user:password@/],
      ['srt://u:secret@h:9000', /SRT encryption: \?passphrase=/],
      ['udp://h:5000/path', /takes no path/],
      ['rtsp://:554/x', /not a valid URI|needs a host/],
      ['rtsp://cam/a b', /spaces or control characters/],
      ['http://cam/\nx', /spaces or control characters/],
      ['rtmp://cam/live', /unknown capture\.uri; use one of:/],
      ['v4l2:video0', /unknown capture\.uri/],
    ];
    for (const [uri, message] of cases) {
      const r = captureUri.safeParse(uri);
      expect(r.success, uri).to.equal(false);
      const text = r.success ? '' : r.error.issues[0]!.message;
      expect(text, uri).to.match(message);
      expect(text, uri).to.not.include('secret');
    }
  });

  it('parses the host and the port, with each scheme\'s default port', () => {
    expect(parseNetworkCaptureUri('rtsp://a:b@cam.lab/x')).to.deep.equal({ scheme: 'rtsp', host: 'cam.lab', port: 554 });
    expect(parseNetworkCaptureUri('https://cam.lab/x')).to.deep.equal({ scheme: 'https', host: 'cam.lab', port: 443 });
    expect(parseNetworkCaptureUri('udp://[::1]:5000')).to.deep.equal({ scheme: 'udp', host: '::1', port: 5000 });
  });

  it('redacts user:password@ and passphrase= wherever they are in a text', () => {
    expect(redactCaptureUri('rtsp://admin:pw@10.0.0.7:8554/live: Connection refused')).to.equal('rtsp://***@10.0.0.7:8554/live: Connection refused');
    expect(redactCaptureUri('-i srt://h:9000?mode=caller&passphrase=0123456789abc&latency=1')).to.equal('-i srt://h:9000?mode=caller&passphrase=***&latency=1');
    expect(redactCaptureUri('Connection to tcp://cam:554?timeout=2000000 failed')).to.equal('Connection to tcp://cam:554?timeout=2000000 failed');
  });
});

describe('capture: ffmpeg input for network streams', () => {
  it('udp: low latency, wall-clock stamps, a 1 s timeout, overruns survived', () => {
    const spec = inputArgs('udp://239.0.0.1:5000', size);
    expect(spec).to.deep.equal({
      args: ['-fflags', 'nobuffer', '-probesize', '500000', '-analyzeduration', '300000', '-fpsprobesize', '0',
        '-use_wallclock_as_timestamps', '1', '-timeout', '1000000', '-overrun_nonfatal', '1', '-i', 'udp://239.0.0.1:5000'],
      stdin: 'none',
      resizes: true,
    });
  });

  it('each protocol its own timeout option (srt 0.5 s); rtsp interleaved over TCP', () => {
    const tail = (uri: string) => networkInputArgs(uri).args.slice(10);
    expect(tail('srt://h:9000')).to.deep.equal(['-timeout', '500000', '-connect_timeout', '1000', '-i', 'srt://h:9000']);
    expect(tail('rtsp://u:p@cam/live')).to.deep.equal(['-rtsp_transport', 'tcp', '-timeout', '1000000', '-i', 'rtsp://u:p@cam/live']);
    expect(tail('http://cam/live.ts')).to.deep.equal(['-rw_timeout', '1000000', '-i', 'http://cam/live.ts']);
    expect(tail('https://cam/live.ts')).to.deep.equal(['-rw_timeout', '1000000', '-i', 'https://cam/live.ts']);
  });

  it('a bad network URI throws before any ffmpeg is started', () => {
    expect(() => inputArgs('udp://nohost', size)).to.throw(/needs a port/);
  });

  it('the whole command: -nostdin, the stream, then the outputs; recording scales to the configured size', () => {
    const rec = recordOutput({ ...size, pattern: 'seg-%06d.ts', list: 'pipe:3', scale: true });
    expect(rec.args.slice(0, 4)).to.deep.equal(['-map', '0:v', '-vf', 'scale=1280:720']);
    expect(recordOutput({ ...size, pattern: 'seg-%06d.ts', list: 'pipe:3' }).args).to.not.include('-vf');
    const args = ffmpegArgs(inputArgs('srt://h:9000', size), [rec]);
    expect(args.slice(0, 5)).to.deep.equal(['-hide_banner', '-nostats', '-loglevel', 'error', '-nostdin']);
    expect(args.indexOf('-i')).to.be.below(args.indexOf('scale=1280:720'));
  });
});

describe('capture: why a network stream ended', () => {
  it('udp: no data for 1 s, whether ffmpeg ended as at a file\'s end (after frames) or with an I/O error', () => {
    expect(networkExitReason('udp://h:5000', failed(0), [])).to.equal('no data from udp://h:5000 for 1 s (ffmpeg exited with code 0)');
    expect(networkExitReason('udp://h:5000', failed(1), ['udp://h:5000: Input/output error'])).to.match(/^no data from udp:\/\/h:5000 for 1 s/);
  });

  it('a connection the sender closed: stream ended', () => {
    expect(networkExitReason('srt://h:9000', failed(0), [])).to.equal('stream ended: srt://h:9000 stopped sending (ffmpeg exited with code 0)');
  });

  it('the cause over the generic last line, decoder chatter skipped, credentials redacted', () => {
    const tail = [
      '[tcp @ 0x1] Failed to resolve hostname nohost.invalid: Name or service not known',
      'http://u:pw@nohost.invalid/x: Input/output error',
    ];
    expect(networkExitReason('http://u:pw@nohost.invalid/x', failed(1), tail)).to.equal('ffmpeg exited with code 1: [tcp @ 0x1] Failed to resolve hostname nohost.invalid: Name or service not known');
    const refused = ['[h264 @ 0x2] non-existing PPS 0 referenced', 'rtsp://u:pw@cam/x: Connection refused', 'Error while decoding stream #0:0: Invalid data found when processing input'];
    expect(networkExitReason('rtsp://u:pw@cam/x', failed(1), refused)).to.equal('ffmpeg exited with code 1: rtsp://***@cam/x: Connection refused');
  });

  it('a kill or a failed spawn is not the stream\'s doing: left to the general reason', () => {
    expect(networkExitReason('udp://h:5000', { code: null, signal: 'SIGKILL' }, [])).to.equal(undefined);
  });
});

describe('capture: network restart schedule', () => {
  it('100 ms, doubling to 1 s; back to 100 ms after 2 s of frames', () => {
    const b = new Backoff(NETWORK_BACKOFF);
    const delays = [0, 1, 2, 3, 4, 5].map((i) => b.failed(i * 1000, undefined));
    expect(delays).to.deep.equal([100, 200, 400, 800, 1000, 1000]);
    expect(b.failed(10_000, 8500)).to.equal(1000); // 1.5 s of frames: still the same outage
    expect(b.failed(20_000, 18_000)).to.equal(100);
  });
});
