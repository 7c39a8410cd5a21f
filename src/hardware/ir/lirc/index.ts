/**
 * LIRC remote files: parse `lircd.conf`, encode key presses to the pulse/space
 * trains LIRC itself would send, print them as irsimsend does.
 */
export type { IrTrain, LircCode, LircRemote, Pair } from './types.js';
export { Flag } from './types.js';
export { parseLircConfig, lircOrder } from './parse.js';
export { LircEncoder, LircSession, encode, assertTransmittable } from './encoder.js';
export type { ToggleState } from './frame.js';
export { formatIrsimsend } from './format.js';
export { irEncodeCommand } from './cli.js';
export { simulateIrsimsend, listFileKey, type SimsendOptions } from './simsend.js';
