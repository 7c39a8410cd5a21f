/** The ffmpeg child wrapper with real processes: group kill, TERM then KILL, stderr tail. */
import { expect } from 'chai';
import { FfmpegChild } from '../../src/hardware/capture/ffmpeg-child.js';
import { silentLogger } from '../../src/logger.js';
import { isAlive } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';

const sh = (script: string, onStdout: (c: Buffer) => void = () => undefined) =>
  new FfmpegChild({ binary: 'sh', args: ['-c', script], stdinPipe: false, logger: silentLogger, onStdout });

describe('capture: FfmpegChild', () => {
  it('terminate() escalates to KILL for a child that ignores TERM, and ends its whole group', async () => {
    // The background sleep is a grandchild in the same group; it must go too.
    let out = '';
    const child = sh('trap "" TERM; sleep 30 & echo $!; while :; do sleep 0.05; done', (c) => (out += c.toString()));
    await waitFor(() => out.includes('\n'), 'the grandchild pid');
    const grandchild = Number(out.trim());
    const exit = await child.terminate(300);
    expect(exit.signal, 'TERM was ignored, so KILL ended it').to.equal('SIGKILL');
    await waitFor(() => !isAlive(grandchild), 'the grandchild in the group to end');
  });

  it('keeps the last stderr line for the exit reason', async () => {
    const child = sh('echo first >&2; printf "second\\r\\n\\nlast line" >&2; exit 3');
    const exit = await child.closed;
    expect([exit.code, exit.signal]).to.deep.equal([3, null]);
    expect(child.lastStderrLine()).to.equal('last line');
  });
});
