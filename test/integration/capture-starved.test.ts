/**
 * A starved ffmpeg is no stuck one (docs/capture.md, "Stalls"): when no frame has come within the staleness bound,
 * the watchdog reads ffmpeg's CPU time before ending it. A stand-in "ffmpeg" (a shell script: a few raw frames on
 * stdout, then either a busy loop or a sleep) gives both cases through the real FfmpegFrameSource: the busy one is
 * waited for (its CPU time grows) until the bound on silence, the sleeping one is ended at the first check.
 */
import { expect } from 'chai';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { cpuTicks, parseCpuTicks } from '../../src/hardware/capture/process-cpu.js';
import { capturingLogger, type CapturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';

const W = 32;
const H = 24;
const WORKING = 'ffmpeg is working but its frames are late (the machine is loaded); waiting again';
const STALLED = 'ffmpeg stalled; ending it';

describe('capture: a starved ffmpeg is waited for, a stuck one is ended', function () {
  this.timeout(120_000);
  let dir: string;
  let source: FfmpegFrameSource | undefined;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-starved-'));
  });
  afterEach(async () => {
    await source?.stop();
    source = undefined;
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** A stand-in ffmpeg: five black frames of W x H on stdout, then `then` (its arguments are ignored). */
  async function fakeFfmpeg(name: string, then: string): Promise<string> {
    const file = join(dir, name);
    await writeFile(file, `#!/bin/sh\nhead -c ${W * H * 3 * 5} /dev/zero\n${then}\n`);
    await chmod(file, 0o755);
    return file;
  }

  const start = async (ffmpeg: string, log: CapturingLogger) => {
    source = new FfmpegFrameSource({ uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 10, ffmpeg, logger: log });
    await source.start();
    await waitFor(() => log.messages().includes('capture online'), 'the first frames');
  };

  it('parses /proc/<pid>/stat, a command name with spaces and parentheses too', () => {
    const fields = ['S', '1', '1', '1', '0', '-1', '4194560', '100', '0', '0', '0', '250', '31'];
    expect(parseCpuTicks(`4242 (ff mpeg (x)) ${fields.join(' ')} 0 0 20 0 1`)).to.equal(281);
    expect(parseCpuTicks('not a stat line')).to.equal(undefined);
    expect(cpuTicks(process.pid)).to.be.a('number');
  });

  it('an ffmpeg whose CPU time grows without frames is waited for, then ended once the silence passes the bound', async () => {
    const log = capturingLogger();
    await start(await fakeFfmpeg('busy.sh', 'while :; do :; done'), log);
    await waitFor(() => log.messages().includes(STALLED), { what: 'the stall, once the bound is passed', timeoutMs: 60_000 });
    const messages = log.messages();
    const waited = messages.indexOf(WORKING);
    expect(waited, 'waited for at least once').to.be.at.least(0);
    expect(waited, 'before it was ended').to.be.below(messages.indexOf(STALLED));
    const entry = log.entries.find((e) => e.msg === WORKING)!;
    expect(entry.obj.cpu_ms).to.be.at.least(20);
  });

  it('an ffmpeg whose CPU time stands still (it sleeps) is ended at the first check, never waited for', async () => {
    const log = capturingLogger();
    await start(await fakeFfmpeg('asleep.sh', 'exec sleep 600'), log);
    await waitFor(() => log.messages().includes(STALLED), { what: 'the stall', timeoutMs: 60_000 });
    expect(log.messages()).to.not.include(WORKING);
  });
});
