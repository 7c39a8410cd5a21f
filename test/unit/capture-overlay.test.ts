/**
 * stbt.draw_text's overlay (src/hardware/capture/overlay.ts): the texts shown and when they end, the file
 * drawtext reads (always whole: replaced by rename), what a script's text can and cannot do, and the ffmpeg
 * outputs that draw it (recording and live view, never the preview).
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ffmpegArgs, inputArgs, liveOutput, previewOutput, recordOutput } from '../../src/hardware/capture/ffmpeg-args.js';
import { DEFAULT_OVERLAY_FONT, drawtextFilter, filterValue, MAX_CHARS, MAX_LINES, overlayLine, TextOverlay } from '../../src/hardware/capture/overlay.js';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { waitFor } from '../helpers/wait.js';

const exec = promisify(execFile);

describe('capture: draw_text overlay', () => {
  let dir: string;
  let overlays: TextOverlay[] = [];
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-overlay-'));
  });
  afterEach(async () => {
    await Promise.all(overlays.map((o) => o.close()));
    overlays = [];
    await rm(dir, { recursive: true, force: true });
  });
  /** An overlay on a clock the test moves. */
  const make = (file = join(dir, 'sub', 'draw-text.txt')) => {
    const clock = { t: 1000 };
    const o = new TextOverlay({ file, now: () => clock.t });
    overlays.push(o);
    return { o, clock, file };
  };

  it('stacks texts one a line, oldest at the top, each until its own end', async () => {
    const { o, clock, file } = make();
    await o.prepare();
    expect(await readFile(file, 'utf8')).to.equal('');
    await o.show('first', 3);
    clock.t += 1000;
    await o.show('second', 1);
    await o.show('third', 5);
    expect(o.lines()).to.deep.equal(['first', 'second', 'third']);
    expect(await readFile(file, 'utf8')).to.equal('first\nsecond\nthird');
    clock.t += 1000; // second ends
    expect(o.lines()).to.deep.equal(['first', 'third']);
    clock.t += 1000; // first ends
    expect(o.lines()).to.deep.equal(['third']);
    await o.show('fourth', 1);
    expect(await readFile(file, 'utf8')).to.equal('third\nfourth');
  });

  it('a duration of 0, below 0 or not a number draws nothing; an infinite one is a day', async () => {
    const { o, clock } = make();
    await o.prepare();
    await o.show('zero', 0);
    await o.show('negative', -1);
    await o.show('nan', NaN);
    expect(o.lines()).to.deep.equal([]);
    await o.show('forever', Infinity);
    clock.t += 24 * 3600 * 1000 - 1;
    expect(o.lines()).to.deep.equal(['forever']);
    clock.t += 1;
    expect(o.lines()).to.deep.equal([]);
  });

  it('the file empties when the last text ends (the timer, on the real clock)', async () => {
    const file = join(dir, 'draw-text.txt');
    const o = new TextOverlay({ file });
    overlays.push(o);
    await o.prepare();
    await o.show('brief', 0.05);
    expect(await readFile(file, 'utf8')).to.equal('brief');
    await waitFor(async () => (await readFile(file, 'utf8')) === '', 'the file to empty when the text ends');
    expect(o.lines()).to.deep.equal([]);
  });

  it(`draws the newest ${MAX_LINES} lines at most`, async () => {
    const { o, file } = make();
    await o.prepare();
    for (let i = 1; i <= MAX_LINES + 3; i++) await o.show(`line ${i}`, 10);
    const lines = (await readFile(file, 'utf8')).split('\n');
    expect(lines).to.have.length(MAX_LINES);
    expect(lines[0]).to.equal('line 4');
    expect(lines[MAX_LINES - 1]).to.equal(`line ${MAX_LINES + 3}`);
  });

  it('clear(owner) takes away only that owner\'s texts (a run ended)', async () => {
    const { o, file } = make();
    await o.prepare();
    const [runA, runB] = [{}, {}];
    await o.show('from a', 10, runA);
    await o.show('from b', 10, runB);
    await o.clear(runA);
    expect(await readFile(file, 'utf8')).to.equal('from b');
    await o.clear(runB);
    expect(await readFile(file, 'utf8')).to.equal('');
  });

  it('writes whole files by rename: many quick changes leave the latest state and no temporaries', async () => {
    const { o, file } = make();
    await o.prepare();
    await writeFile(join(dir, 'sub', '.draw-text.txt.1.deadbeef.tmp'), 'left by a crash');
    await o.prepare(); // at start, what a crash left is deleted
    expect(await readdir(join(dir, 'sub'))).to.deep.equal(['draw-text.txt']);
    const shows = Array.from({ length: 50 }, (_, i) => o.show(`text ${i}`, 10));
    await Promise.all(shows);
    const content = await readFile(file, 'utf8');
    expect(content.split('\n')).to.deep.equal(Array.from({ length: MAX_LINES }, (_, i) => `text ${50 - MAX_LINES + i}`));
    expect(await readdir(join(dir, 'sub'))).to.deep.equal(['draw-text.txt']);
  });

  it('a text is one line: control characters become spaces, long texts are cut; the file holds the text as given otherwise', async () => {
    expect(overlayLine('a\nb\r\nc\td\u0000e\u007f\u0085f\u2028g')).to.equal('a b  c d e  f g');
    expect([...overlayLine('é'.repeat(MAX_CHARS + 10))]).to.have.length(MAX_CHARS);
    expect(overlayLine('😀'.repeat(MAX_CHARS + 1))).to.equal('😀'.repeat(MAX_CHARS)); // cut between code points
    const { o, file } = make();
    await o.prepare();
    const hostile = "x:y,z'w [a];b %{pts} \\ ../../etc/passwd";
    await o.show(hostile, 10);
    expect(await readFile(file, 'utf8')).to.equal(hostile);
    expect(await readdir(join(dir, 'sub'))).to.deep.equal(['draw-text.txt']);
  });

  it('filterValue escapes both levels of a filtergraph', () => {
    expect(filterValue('/a/b.txt')).to.equal('/a/b.txt');
    expect(filterValue('a:b')).to.equal('a\\\\:b');
    expect(filterValue("a'b")).to.equal("a\\\\\\'b");
    expect(filterValue('a,b;c[d]')).to.equal('a\\,b\\;c\\[d\\]');
    expect(filterValue('a\\b')).to.equal('a\\\\\\\\b');
  });

  it('drawtext: the file with reload and no expansion, a box, sizes from the picture height', () => {
    const f = drawtextFilter({ file: '/d/draw-text.txt', font: '/f.ttf', height: 720 });
    expect(f).to.equal(
      'drawtext=fontfile=/f.ttf:textfile=/d/draw-text.txt:reload=1:expansion=none:fontsize=30:fontcolor=white:line_spacing=6:x=18:y=18:box=1:boxcolor=black@0.65:boxborderw=8',
    );
    expect(drawtextFilter({ file: '/d/t', font: '/f.ttf', height: 360 })).to.include(':fontsize=15:');
  });

  it('ffmpeg reads the file through a folder name full of filtergraph specials, and draws what it holds', async function () {
    this.timeout(20_000);
    const odd = join(dir, "we:ird,na'me [x];y");
    await mkdir(odd);
    const o = new TextOverlay({ file: join(odd, 'draw-text.txt') });
    overlays.push(o);
    await o.prepare();
    await o.show("%{pts} 'quoted' a:b", 10);
    const filter = drawtextFilter({ file: o.file, font: DEFAULT_OVERLAY_FONT, height: 120 });
    const png = (vf: string[]) => exec('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'color=c=black:size=160x120:rate=1', '-frames:v', '1', ...vf, '-f', 'rawvideo', '-pix_fmt', 'gray', '-'], { encoding: 'buffer' });
    const [drawn, plain] = [(await png(['-vf', filter])).stdout, (await png([])).stdout];
    expect(drawn.length).to.equal(160 * 120);
    // White text on the top left of a black picture.
    let bright = 0;
    for (let y = 0; y < 40; y++) for (let x = 0; x < 160; x++) if (drawn[y * 160 + x]! > 128) bright++;
    expect(bright).to.be.above(20);
    expect(plain.every((v) => v < 20)).to.equal(true);
  });

  it('ffmpeg args: drawtext on the recording (after its scale) and the live view (after its scale), never the preview', () => {
    const overlay = drawtextFilter({ file: '/d/t', font: '/f.ttf', height: 720 });
    const rec = recordOutput({ width: 1280, height: 720, fps: 25, pattern: 'seg-%06d.ts', list: 'pipe:3', overlay });
    expect(rec.args[rec.args.indexOf('-vf') + 1]).to.equal(overlay);
    const scaled = recordOutput({ width: 1280, height: 720, fps: 25, pattern: 'seg-%06d.ts', list: 'pipe:3', scale: true, overlay });
    expect(scaled.args[scaled.args.indexOf('-vf') + 1]).to.equal(`scale=1280:720,${overlay}`);
    expect(recordOutput({ width: 1280, height: 720, fps: 25, pattern: 'p', list: 'l' }).args).to.not.include('-vf');
    const live = liveOutput({ width: 640, height: 360, rate: 25, pipe: 'pipe:4', overlay });
    expect(live.args[live.args.indexOf('-vf') + 1]).to.equal(`scale=640:360:flags=fast_bilinear,${overlay}`);
    expect(liveOutput({ width: 640, height: 360, rate: 25, pipe: 'pipe:4' }).args.join(' ')).to.not.include('drawtext');
    const preview = previewOutput({ width: 1280, height: 720, previewFps: 5 });
    const all = ffmpegArgs(inputArgs('testsrc:', { width: 1280, height: 720, fps: 25 }), [preview, rec, live]);
    expect(all.filter((a) => a.includes('drawtext'))).to.have.length(2);
    expect(preview.args.join(' ')).to.not.include('drawtext');
  });

  it('the frame source puts drawtext on recording and live outputs, with each output\'s height, only when the overlay is prepared', async () => {
    const base = { uri: 'testsrc:', width: 1280, height: 720, fps: 25, preview_fps: 5, live_fps: 25, live_width: 640, ffmpeg: 'ffmpeg' };
    const file = join(dir, 'capture', 'draw-text.txt');
    const missingFont = new FfmpegFrameSource({ ...base, overlay: { file, font: join(dir, 'no-such-font.ttf') }, recording: { dir: join(dir, 'rec') } });
    try {
      await missingFont.start();
      // No font: no filter (ffmpeg would not start), draw_text only logs.
      expect(missingFont.commandArgs().join(' ')).to.not.include('drawtext');
      expect(await missingFont.drawText('x', 3)).to.equal(false);
    } finally {
      await missingFont.stop();
    }
    const source = new FfmpegFrameSource({ ...base, overlay: { file }, recording: { dir: join(dir, 'rec') } });
    try {
      await source.start();
      const args = source.commandArgs();
      const vfs = args.flatMap((a, i) => (args[i - 1] === '-vf' ? [a] : []));
      expect(vfs).to.have.length(3);
      expect(vfs[0]).to.equal('scale=1280:720'); // the preview
      expect(vfs.filter((v) => v.includes(':fontsize=30:'))).to.have.length(1); // the recording, 720 high
      expect(vfs.filter((v) => v.includes(':fontsize=15:'))).to.have.length(1); // the live view, 360 high
      expect(await readFile(file, 'utf8')).to.equal('');
      expect(await source.drawText('hello', 3)).to.equal(true);
      expect(await readFile(file, 'utf8')).to.equal('hello');
      expect(source.overlayLines()).to.deep.equal(['hello']);
    } finally {
      await source.stop();
    }
  });
});
