/** `none`: no IR blaster. Every send fails with a message a person can act on. */
import { FarmError } from '../../../core/errors.js';
import type { IrTransport } from './types.js';

export class NoTransport implements IrTransport {
  readonly uri = 'none';

  send(): Promise<void> {
    return Promise.reject(new FarmError('device_unavailable', 'no IR blaster configured'));
  }

  async close(): Promise<void> {}
}
