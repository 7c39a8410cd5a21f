/** The ffmpeg child wrapper with real processes: group kill, TERM then KILL, stderr tail. */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { FfmpegChild } from '../../src/hardware/capture/ffmpeg-child.js';
import { silentLogger } from '../../src/logger.js';

const sh = (script: string, onStdout: (c: Buffer) => void = () => undefined) =>
  new FfmpegChild({ binary: 'sh', args: ['-c', script], stdinPipe: false, logger: silentLogger, onStdout });

/** Running, i.e. neither gone nor a zombie waiting for its new parent to reap it. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('capture: FfmpegChild', () => {
  it('terminate() escalates to KILL for a child that ignores TERM, and ends its whole group', async () => {
    // The background sleep is a grandchild in the same group; it must go too.
    let out = '';
    const child = sh('trap "" TERM; sleep 30 & echo $!; while :; do sleep 0.05; done', (c) => (out += c.toString()));
    while (!out.includes('\n')) await new Promise((r) => setTimeout(r, 10));
    const grandchild = Number(out.trim());
    const t0 = Date.now();
    const exit = await child.terminate(300);
    expect(exit.signal).to.equal('SIGKILL');
    expect(Date.now() - t0).to.be.within(250, 3000);
    await new Promise((r) => setTimeout(r, 50));
    expect(alive(grandchild), 'grandchild in the group').to.equal(false);
  });

  it('keeps the last stderr line for the exit reason', async () => {
    const child = sh('echo first >&2; printf "second\\r\\n\\nlast line" >&2; exit 3');
    const exit = await child.closed;
    expect([exit.code, exit.signal]).to.deep.equal([3, null]);
    expect(child.lastStderrLine()).to.equal('last line');
  });
});
