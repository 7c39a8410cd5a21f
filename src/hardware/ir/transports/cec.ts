/**
 * `cec:/dev/cec0`: HDMI-CEC through the kernel's CEC framework. Messages go
 * through a resident helper (cec-helper.ts: python3 doing the CEC_TRANSMIT
 * ioctl, one process per adapter kept open), so a press is a line on a pipe,
 * not a process start. A tap is <User Control Pressed> and <User Control
 * Released> in one request; a held key repeats <User Control Pressed> every
 * 400 ms (a follower takes a key as released when no repeat comes within
 * 550 ms) until the release. `standby` sends <Standby>; `power-on` sends
 * <Image View On> to a TV (logical address 0) and the Power On Function UI
 * command to anything else.
 *
 * `cec:/dev/cec0?to=<la>` names the device's logical address: 4 (Playback
 * Device 1, a set-top box) unless given. An adapter without a logical
 * address is configured once with `cec-ctl` (v4l-utils: `--tv`, or
 * `--playback` when the device is the TV) and the press tried again.
 *
 * A message the device does not acknowledge (Tx NACK: asleep, or not on the
 * bus) is logged as a warning and the press succeeds, as the issue asks: many
 * devices act on a key without acknowledging it. A device that is missing or
 * not a CEC adapter, another bus error, a helper or cec-ctl that is missing,
 * fails, or takes longer than `timeoutMs` is `device_unavailable`.
 */
import { execFile } from 'node:child_process';
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { silentLogger } from '../../../logger.js';
import { SerialQueue, sleep } from './async.js';
import { CecHelper, type CecAnswer } from './cec-helper.js';
import { CEC_KEYS, CEC_POWER_ON, CEC_STANDBY, resolveKey } from './keymaps.js';
import { DEFAULT_TIMEOUT_MS, holdFor, holdMsOf, noTrains, type NamedKeyOptions } from './named.js';
import type { HoldOptions, IrTrain, IrTransport, KeyMap, SendKeyOptions, SendOptions } from './types.js';

/** How often a held key's <User Control Pressed> is repeated (CEC: 200 to 500 ms). */
export const CEC_REPEAT_MS = 400;
/** The logical address keys go to unless the URI says otherwise: Playback Device 1. */
export const DEFAULT_CEC_TARGET = 4;

export interface CecOptions extends NamedKeyOptions {
  /** The cec-ctl program (configures an adapter without a logical address): a path, or a name on PATH; default `cec-ctl`. */
  cecCtl?: string;
  /** The python3 that runs the helper; default `/usr/bin/python3` (Debian's). */
  python?: string;
}

/** One message as the helper takes it: cec-ctl's name for it and its UI command, if any. */
type CecMessage = string[];

/** `cec:/dev/cecN[?to=<la>]` -> device and target; `invalid_request` for anything else. */
export function parseCecUri(rest: string): { device: string; to: number } {
  const [path = '', query = ''] = rest.split('?', 2);
  const device = path === '' ? '/dev/cec0' : path;
  if (!/^\/dev\/[\w./-]+$/.test(device)) throw new FarmError('invalid_request', `IR transport "cec:${rest}": use cec:/dev/cec0 (a CEC device node)`);
  const params = new URLSearchParams(query);
  const extra = [...params.keys()].filter((k) => k !== 'to');
  if (extra.length > 0) throw new FarmError('invalid_request', `IR transport "cec:${rest}": unknown option ${extra[0]}; only ?to=<logical address 0-14>`);
  const toText = params.get('to');
  const to = toText === null ? DEFAULT_CEC_TARGET : Number(toText);
  if (!Number.isInteger(to) || to < 0 || to > 14 || (toText !== null && !/^\d{1,2}$/.test(toText))) {
    throw new FarmError('invalid_request', `IR transport "cec:${rest}": to must be a logical address from 0 (TV) to 14, e.g. 4 (Playback Device 1)`);
  }
  return { device, to };
}

export class CecTransport implements IrTransport {
  readonly uri: string;
  readonly keyMap: KeyMap = CEC_KEYS;
  readonly device: string;
  readonly to: number;
  private readonly cecCtl: string;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly helper: CecHelper;
  private readonly queue = new SerialQueue();
  private closed = false;

  constructor(rest: string, opts: CecOptions = {}) {
    ({ device: this.device, to: this.to } = parseCecUri(rest));
    this.uri = `cec:${this.device}${this.to === DEFAULT_CEC_TARGET ? '' : `?to=${this.to}`}`;
    this.cecCtl = opts.cecCtl ?? 'cec-ctl';
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.log = (opts.logger ?? silentLogger).child({ ir: this.uri });
    this.helper = new CecHelper(this.device, opts.python ?? '/usr/bin/python3', this.timeoutMs);
  }

  send(_trains: readonly IrTrain[], _opts?: SendOptions): Promise<void> {
    return noTrains(this.uri);
  }

  /** A tap (pressed + released in one request), or a hold of `holdMs`; standby and power-on are their own messages. */
  async sendKey(_remote: string, key: string, opts: SendKeyOptions = {}): Promise<void> {
    const cmd = resolveKey(this.keyMap, key);
    const holdMs = holdMsOf(opts.holdMs);
    await this.queue.run(async () => {
      if (holdMs === 0 || cmd === CEC_STANDBY || cmd === CEC_POWER_ON) return this.messages(this.tap(cmd), opts.signal);
      return this.hold(cmd, { maxMs: holdMs, ...(opts.signal && { signal: opts.signal }), rejectOnAbort: true });
    }, opts.signal);
  }

  /** <User Control Pressed>, repeated until the release (or `maxMs`), then <User Control Released>. */
  async holdKey(_remote: string, key: string, opts: HoldOptions): Promise<void> {
    const cmd = resolveKey(this.keyMap, key);
    if (cmd === CEC_STANDBY || cmd === CEC_POWER_ON) {
      await this.queue.run(() => this.messages(this.tap(cmd), opts.signal), opts.signal);
      opts.onDown?.();
      return;
    }
    await this.queue.run(() => this.hold(cmd, opts), opts.signal);
  }

  /** Wake the device: <Image View On> to a TV, Power On Function to other devices. */
  powerOn(signal?: AbortSignal): Promise<void> {
    return this.queue.run(() => this.messages(this.tap(CEC_POWER_ON), signal), signal);
  }

  /** Put the device in standby: <Standby>. */
  standby(signal?: AbortSignal): Promise<void> {
    return this.queue.run(() => this.messages(this.tap(CEC_STANDBY), signal), signal);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue.idle();
    await this.helper.close();
  }

  /** The messages of one key: a tap, or the message standby / power-on stand for. */
  private tap(cmd: string): CecMessage[] {
    if (cmd === CEC_STANDBY) return [['standby']];
    if (cmd === CEC_POWER_ON && this.to === 0) return [['image-view-on']];
    const ui = cmd === CEC_POWER_ON ? 'power-on-function' : cmd;
    return [['user-control-pressed', ui], ['user-control-released']];
  }

  private hold(cmd: string, opts: HoldOptions & { rejectOnAbort?: boolean }): Promise<void> {
    const pressed = [['user-control-pressed', cmd]];
    const ended = new AbortController();
    let repeating: Promise<void> = Promise.resolve();
    const down = async () => {
      await this.messages(pressed);
      repeating = this.repeat(pressed, ended.signal);
    };
    const up = async () => {
      ended.abort();
      await repeating; // a repeat in flight goes out before the release, never after it
      await this.messages([['user-control-released']]);
    };
    return holdFor(down, up, opts);
  }

  /** Repeats <User Control Pressed> until `ended` aborts; a failed repeat is logged (the release still goes out). */
  private async repeat(pressed: CecMessage[], ended: AbortSignal): Promise<void> {
    while (!ended.aborted) {
      try {
        await sleep(CEC_REPEAT_MS, ended);
        await this.messages(pressed);
      } catch (e) {
        if (!ended.aborted) this.log.warn({ err: e }, 'CEC key repeat failed');
        return;
      }
    }
  }

  /** Send messages to the target; configure the adapter and try again when it has no logical address. */
  private async messages(msgs: CecMessage[], signal?: AbortSignal): Promise<void> {
    if (this.closed) throw new FarmError('device_unavailable', `${this.uri} is closed`);
    let answer = await this.helper.send(this.to, msgs, signal);
    if (unconfigured(answer)) {
      const role = this.to === 0 ? '--playback' : '--tv';
      this.log.info({ role }, 'the CEC adapter has no logical address: configuring it');
      await this.cecCtlRun([role, '--osd-name', 'farmhand'], signal);
      answer = await this.helper.send(this.to, msgs, signal);
      if (unconfigured(answer)) {
        throw new FarmError('device_unavailable', `the CEC adapter ${this.device} has no logical address after cec-ctl ${role}: is the HDMI cable connected?`);
      }
    }
    this.judge(answer, msgs);
  }

  /** NACKs are warnings; a message the adapter could not send at all, or another bus error, fails the press. */
  private judge(answer: CecAnswer, msgs: CecMessage[]): void {
    if ('error' in answer) throw new FarmError('device_unavailable', `CEC ${this.device}: ${answer.message ?? answer.error}`);
    const nack = answer.sent.find((m) => m.result === 'nack');
    if (nack !== undefined) {
      this.log.warn({ to: this.to, messages: msgs.map((m) => m.join(' ')).join(', '), msg: nack.msg, status: nack.status }, 'the CEC device did not acknowledge (Tx NACK): the press counts as sent');
    }
    const failed = answer.sent.find((m) => m.result === 'failed');
    if (failed !== undefined) throw new FarmError('device_unavailable', `CEC ${this.device} could not send to logical address ${this.to}: ${failed.status} (message ${failed.msg})`);
  }

  /** One `cec-ctl -d <device> -s <args>` run (configuring the adapter); its failures are device_unavailable. */
  private cecCtlRun(args: string[], signal?: AbortSignal): Promise<void> {
    const argv = ['-d', this.device, '-s', ...args];
    return new Promise<void>((resolve, reject) => {
      execFile(this.cecCtl, argv, { timeout: this.timeoutMs, killSignal: 'SIGKILL', ...(signal && { signal }) }, (err, _stdout, stderr) => {
        if (!err) return resolve();
        if (signal?.aborted) return reject(signal.reason);
        reject(this.failure(err, stderr));
      });
    });
  }

  private failure(err: Error & { killed?: boolean; code?: unknown }, stderr: string): FarmError {
    if (err.code === 'ENOENT') return new FarmError('device_unavailable', `${this.cecCtl} was not found: install v4l-utils (cec-ctl)`);
    if (err.killed) return new FarmError('device_unavailable', `cec-ctl did not finish within ${this.timeoutMs} ms on ${this.device}`);
    const why = stderr.trim().split('\n').pop() || err.message;
    return new FarmError('device_unavailable', `cec-ctl failed on ${this.device}: ${why}`);
  }
}

const unconfigured = (a: CecAnswer): boolean => 'error' in a && a.error === 'unconfigured';
