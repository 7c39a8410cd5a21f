/** Restart delays of the capture supervisor. */
import { expect } from 'chai';
import { Backoff, CAPTURE_BACKOFF } from '../../src/hardware/capture/backoff.js';

describe('capture: restart back-off', () => {
  it('starts at 0.5 s and doubles up to 30 s', () => {
    const b = new Backoff();
    const delays = Array.from({ length: 9 }, (_, i) => b.failed(i * 1000, undefined));
    expect(delays).to.deep.equal([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it('goes back to 0.5 s after a child was healthy for 10 s', () => {
    expect(CAPTURE_BACKOFF.healthyResetMs).to.equal(10_000);
    const b = new Backoff();
    for (let i = 0; i < 5; i++) b.failed(0, undefined);
    expect(b.failed(100_000, 100_000 - CAPTURE_BACKOFF.healthyResetMs)).to.equal(500);
    expect(b.failed(100_001, undefined)).to.equal(1000);
  });

  it('keeps growing when the child was healthy for less than 10 s', () => {
    const b = new Backoff();
    b.failed(0, undefined);
    b.failed(0, undefined);
    expect(b.failed(100_000, 100_000 - 9_000)).to.equal(2000);
  });

  it('a capture that stalls after every 20 s of frames restarts after 0.5 s each time, not after 30 s', () => {
    const b = new Backoff();
    const delays: number[] = [];
    let t = 0;
    for (let i = 0; i < 10; i++) {
      const healthySince = t + 1_000; // first frame a second after the start
      t = healthySince + 20_000; // frames for 20 s, then the stall is seen
      delays.push(b.failed(t, healthySince));
      t += delays.at(-1)!;
    }
    expect(delays).to.deep.equal(Array(10).fill(500));
  });
});
