/** `none:` capture: a node without a card is always offline. */
import { expect } from 'chai';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFrameSource, NoneFrameSource } from '../../src/hardware/capture/index.js';
import { rejectionCode } from '../helpers/rejections.js';

const config = { uri: 'none:', width: 320, height: 240, fps: 25, preview_fps: 5, ffmpeg: 'ffmpeg' };


describe('capture: none:', () => {
  it('createFrameSource picks the always-offline source for none:', () => {
    expect(createFrameSource(config)).to.be.instanceOf(NoneFrameSource);
  });

  it('is offline with a reason, and screenshots answer device_unavailable (503 node offline)', async () => {
    const s = createFrameSource(config);
    await s.start();
    expect(s.health()).to.deep.equal({ online: false, reason: 'no capture device configured' });
    expect(await rejectionCode(s.screenshotPng())).to.equal('device_unavailable');
    expect(await rejectionCode(s.thumbnailJpeg())).to.equal('device_unavailable');
    await s.stop();
  });

  it('saveScreenshot resolves false and writes nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'farmhand-capture-'));
    try {
      expect(await createFrameSource(config).saveScreenshot(dir)).to.equal(false);
      expect(await readdir(dir)).to.deep.equal([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
