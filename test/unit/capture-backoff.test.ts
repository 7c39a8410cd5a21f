/** Restart delays of the capture supervisor. */
import { expect } from 'chai';
import { Backoff, CAPTURE_BACKOFF } from '../../src/hardware/capture/backoff.js';

describe('capture: restart back-off', () => {
  it('starts at 0.5 s and doubles up to 30 s', () => {
    const b = new Backoff();
    const delays = Array.from({ length: 9 }, (_, i) => b.failed(i * 1000, undefined));
    expect(delays).to.deep.equal([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it('goes back to 0.5 s after a child was healthy for a minute', () => {
    const b = new Backoff();
    for (let i = 0; i < 5; i++) b.failed(0, undefined);
    expect(b.failed(100_000, 100_000 - CAPTURE_BACKOFF.healthyResetMs)).to.equal(500);
    expect(b.failed(100_001, undefined)).to.equal(1000);
  });

  it('keeps growing when the child was healthy for less than a minute', () => {
    const b = new Backoff();
    b.failed(0, undefined);
    b.failed(0, undefined);
    expect(b.failed(100_000, 100_000 - 59_000)).to.equal(2000);
  });
});
