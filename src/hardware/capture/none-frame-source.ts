/**
 * The frame source of a node without a capture card (`none:`): always
 * offline, so screenshot endpoints answer 503 and runs save no screenshot.
 */
import { FarmError } from '../../core/errors.js';
import type { CaptureHealth, FrameSource } from '../../core/ports.js';

export const NO_CAPTURE_REASON = 'no capture device configured';

export class NoneFrameSource implements FrameSource {
  health(): CaptureHealth {
    return { online: false, reason: NO_CAPTURE_REASON };
  }

  async screenshotPng(): Promise<Buffer> {
    throw new FarmError('device_unavailable', NO_CAPTURE_REASON);
  }

  async thumbnailJpeg(): Promise<Buffer> {
    throw new FarmError('device_unavailable', NO_CAPTURE_REASON);
  }

  async saveScreenshot(): Promise<boolean> {
    return false;
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {}
}
