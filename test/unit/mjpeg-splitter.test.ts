/**
 * The live output's MJPEG byte stream split into pictures
 * (src/hardware/capture/mjpeg-splitter.ts), on real ffmpeg output: every
 * picture whole whatever the chunk sizes, 0xFFD9 only at a picture's end,
 * a table or comment holding 0xFFD9 not taken for the end, and identical
 * input frames giving identical JPEG bytes (the live view's still-picture check).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import sharp from 'sharp';
import { liveOutput } from '../../src/hardware/capture/ffmpeg-args.js';
import { MjpegSplitter } from '../../src/hardware/capture/mjpeg-splitter.js';

const run = promisify(execFile);

/** `frames` pictures of `source` (a lavfi graph) through the live output's own arguments, on stdout. */
async function mjpeg(source: string, frames: number): Promise<Buffer> {
  const out = liveOutput({ width: 160, height: 90, rate: 25, pipe: 'pipe:1' }).args;
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', source, '-frames:v', String(frames), ...out], { encoding: 'buffer', maxBuffer: 64 << 20 });
  return stdout;
}

function split(bytes: Buffer, chunkSizes: number[]): Buffer[] {
  const s = new MjpegSplitter();
  const out: Buffer[] = [];
  for (let p = 0, i = 0; p < bytes.length; i++) {
    const n = chunkSizes[i % chunkSizes.length]!;
    out.push(...s.push(Buffer.from(bytes.subarray(p, p + n))));
    p += n;
  }
  return out;
}

const count = (b: Buffer, pat: Buffer) => {
  let n = 0;
  for (let p = b.indexOf(pat); p >= 0; p = b.indexOf(pat, p + 1)) n++;
  return n;
};

describe('MJPEG splitter: the live output on real ffmpeg', function () {
  this.timeout(60_000);

  it('splits ffmpeg\'s MJPEG into whole pictures, whatever the chunk sizes; 0xFFD9 appears only at each end', async () => {
    const bytes = await mjpeg('testsrc=size=320x180:rate=25', 20);
    expect(count(bytes, Buffer.from([0xff, 0xd9]))).to.equal(20); // byte stuffing: EOI only
    for (const sizes of [[1], [7, 3, 1000], [bytes.length]]) {
      const pics = split(bytes, sizes);
      expect(pics).to.have.length(20);
      expect(Buffer.concat(pics).equals(bytes)).to.equal(true);
      const meta = await sharp(pics[19]).metadata();
      expect([meta.width, meta.height]).to.deep.equal([160, 90]);
    }
  });

  it('a marker segment holding the bytes 0xFFD9 is not taken for the end of the picture', async () => {
    const [pic] = split(await mjpeg('testsrc=size=320x180:rate=25', 1), [1 << 20]);
    // A comment segment (FFFE) right after SOI whose text holds FF D9.
    const com = Buffer.from([0xff, 0xfe, 0x00, 0x06, 0x61, 0xff, 0xd9, 0x62]);
    const withCom = Buffer.concat([pic!.subarray(0, 2), com, pic!.subarray(2)]);
    const pics = split(Buffer.concat([withCom, withCom]), [13]);
    expect(pics.map((p) => p.length)).to.deep.equal([withCom.length, withCom.length]);
    await sharp(pics[0]).metadata();
  });

  it('identical input frames give identical JPEG bytes (a still picture is not sent again)', async () => {
    // One picture a second repeated to 25: every 25 frames the same input.
    const pics = split(await mjpeg('testsrc=size=320x180:rate=1,fps=25', 10), [4096]);
    expect(pics).to.have.length(10);
    for (const p of pics.slice(1)) expect(p.equals(pics[0]!)).to.equal(true);
  });
});
