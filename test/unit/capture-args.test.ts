/** The ffmpeg command line: input by URI, preview output, exit reasons. */
import { expect } from 'chai';
import { ffmpegArgs, inputArgs, previewOutput } from '../../src/hardware/capture/ffmpeg-args.js';
import { describeExit } from '../../src/hardware/capture/ffmpeg-child.js';

const size = { width: 320, height: 240, fps: 25 };

describe('capture: ffmpeg arguments', () => {
  it('testsrc: is lavfi testsrc2 paced in real time', () => {
    expect(inputArgs('testsrc:', size)).to.deep.equal({
      args: ['-re', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25'],
      stdin: 'none',
    });
  });

  it('v4l2: passes size, rate and the input format only when set', () => {
    expect(inputArgs('v4l2:/dev/video2', size).args).to.deep.equal([
      '-f', 'v4l2', '-video_size', '320x240', '-framerate', '25', '-i', '/dev/video2',
    ]);
    expect(inputArgs('v4l2:/dev/video0', { ...size, input_format: 'mjpeg' }).args).to.deep.equal([
      '-f', 'v4l2', '-input_format', 'mjpeg', '-video_size', '320x240', '-framerate', '25', '-i', '/dev/video0',
    ]);
  });

  it('virtual: reads raw rgb24 frames from stdin, timed by the wall clock (not by counting them)', () => {
    expect(inputArgs('virtual:', size)).to.deep.equal({
      args: ['-use_wallclock_as_timestamps', '1', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', '320x240', '-framerate', '25', '-i', 'pipe:0'],
      stdin: 'frames',
    });
  });

  it('rejects URIs ffmpeg cannot read', () => {
    for (const uri of ['none:', 'v4l2:video0', 'file:/x.mp4']) expect(() => inputArgs(uri, size), uri).to.throw();
  });

  it('puts global options, the input, then every output in order', () => {
    const input = inputArgs('testsrc:', size);
    const preview = previewOutput({ width: 320, height: 240, previewFps: 5 });
    const second = { args: ['-f', 'null', '-'] };
    const args = ffmpegArgs(input, [preview, second]);
    expect(args.slice(0, 5)).to.deep.equal(['-hide_banner', '-nostats', '-loglevel', 'error', '-nostdin']);
    expect(args.slice(5)).to.deep.equal([...input.args, ...preview.args, ...second.args]);
    expect(preview.args).to.include('scale=320:240');
    expect(preview.args.slice(-5)).to.deep.equal(['-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1']);
  });

  it('without a constant rate (no recording) frames are passed as they come, dropped to the rate, never held or repeated', () => {
    const preview = previewOutput({ width: 320, height: 240, previewFps: 25, constantRate: false });
    expect(preview.args.join(' ')).to.equal('-map 0:v -threads 1 -vf scale=320:240 -fps_mode vfr -r 25 -f rawvideo -pix_fmt rgb24 pipe:1');
    const cfr = previewOutput({ width: 320, height: 240, previewFps: 25, constantRate: true });
    expect(cfr.args.join(' ')).to.equal('-map 0:v -threads 1 -vf scale=320:240 -fps_mode cfr -r 25 -f rawvideo -pix_fmt rgb24 pipe:1');
  });

  it('with a constant rate (recording) no fps filter holds a frame back for its slot (issue 20)', () => {
    // The fps filter waits for an input frame past the middle of each output slot: 100-150 ms on every new
    // picture at 5 a second. The constant rate comes from the output's own frame-rate mode instead.
    const cfr = previewOutput({ width: 320, height: 240, previewFps: 25, constantRate: true });
    expect(cfr.args.join(' ')).not.to.match(/fps=/);
    expect(cfr.args.join(' ')).to.include('-fps_mode cfr -r 25');
  });

  it('keeps stdin open (no -nostdin) when the input reads frames from it', () => {
    const args = ffmpegArgs(inputArgs('virtual:', size), [previewOutput({ width: 320, height: 240, previewFps: 5 })]);
    expect(args).not.to.include('-nostdin');
  });
});

describe('capture: ffmpeg exit reasons', () => {
  it('names a missing binary', () => {
    const error = Object.assign(new Error('spawn /x/ffmpeg ENOENT'), { code: 'ENOENT' });
    expect(describeExit('/x/ffmpeg', { code: -2, signal: null, error }, undefined)).to.equal('ffmpeg not found: /x/ffmpeg');
  });

  it('gives the exit code or signal with the last stderr line', () => {
    expect(describeExit('ffmpeg', { code: 1, signal: null }, '/dev/video9: No such file or directory')).to.equal(
      'ffmpeg exited with code 1: /dev/video9: No such file or directory',
    );
    expect(describeExit('ffmpeg', { code: null, signal: 'SIGKILL' }, undefined)).to.equal('ffmpeg was killed by SIGKILL');
  });
});
