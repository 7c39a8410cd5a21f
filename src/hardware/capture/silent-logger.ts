/** A Logger that drops everything: the default when the caller passes none. */
import type { Logger } from '../../core/ports.js';

const noop = (): void => undefined;

export const silentLogger: Logger = {
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  child: () => silentLogger,
};
