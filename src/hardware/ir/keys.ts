/**
 * Key presses on the device under test: the one place that turns "press
 * KEY_OK on remote `tv` of the test pack at <sha>" into infrared.
 *
 * The remote is the test pack's `config/remote-control/<remote>.lircd.conf`
 * at that commit, parsed once per commit and remote. One `LircEncoder` is
 * kept per remote for as long as its file's text stays the same, so toggle
 * bits alternate across presses, runs and commits, as they would on the real
 * remote. Presses are handled one at a time in arrival order (the encoder's
 * state follows the order the device sees them). A transport that encodes
 * keys itself (lircd) gets the key by name; every other transport gets the
 * trains of `LircEncoder.sendOnce`. A transport with a key map (HDMI-CEC,
 * Roku, ADB: docs/remotes.md) reads no remote file: the key is checked
 * against its map and sent by name, held for `holdMs`.
 */
import { invalid } from '../../core/errors.js';
import type { Logger, TestPack } from '../../core/ports.js';
import { LircEncoder, parseLircConfig, type IrTrain, type LircRemote } from './lirc/index.js';
import { resolveKey } from './transports/keymaps.js';
import type { IrTransport } from './transports/types.js';

/** The longest press_and_hold, in ms (lircd caps SEND_ONCE at 600 repeats; an NEC repeat is 108 ms). */
export const MAX_HOLD_MS = 60_000;

/** lircd's repeat_max for SEND_ONCE. */
const LIRCD_MAX_REPEATS = 600;
/** Remote names are file names without the `.lircd.conf` suffix. */
const REMOTE_NAME = /^[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,127}$/;
/** Key names as LIRC and lircd's protocol accept them: one word. */
const KEY_NAME = /^[\x21-\x7e]{1,64}$/;
/** Parsed remotes kept (commit x remote pairs); a daemon sees few of each. */
const PARSE_CACHE_SIZE = 32;

export interface PressOptions {
  /** Test-pack name of the remote: `config/remote-control/<remote>.lircd.conf`. */
  remote: string;
  /** Full SHA of the test-pack commit whose remote file is used. */
  testPackSha: string;
  /** Keep the key pressed this long (repeat frames); 0 or absent: one press. */
  holdMs?: number;
  /** Aborting stops a press still waiting or being sent (rejects with the signal's reason). */
  signal?: AbortSignal;
  /**
   * Hold the key from now until `signal` aborts (at most `holdMs`): stbt's
   * `pressing`. On transports that can hold a key for real (lircd, virtual)
   * the press then resolves once the key is up; on the others (the IR Toy)
   * it is the `holdMs` press that the abort cuts short at its next
   * transmission boundary.
   */
  untilReleased?: boolean;
  /** Called once the key is down (a held key), or as the press starts being sent. */
  onDown?: () => void;
}

export interface KeyPresserOptions {
  testPack: Pick<TestPack, 'readFile' | 'config' | 'remoteControls'>;
  transport: IrTransport;
  logger?: Logger;
}

interface ParsedRemote {
  text: string;
  remote: LircRemote;
}

export const remoteFile = (remote: string): string => `config/remote-control/${remote}.lircd.conf`;

export class KeyPresser {
  private readonly parsed = new Map<string, Promise<ParsedRemote>>();
  private readonly encoders = new Map<string, { text: string; encoder: LircEncoder }>();
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: KeyPresserOptions) {}

  /** The transport's URI, for the run log's press lines. */
  get transportUri(): string {
    return this.o.transport.uri;
  }

  /**
   * Press `key` (case-insensitive, as LIRC matches it). Resolves when the
   * transport reports the IR sent. Errors: `invalid_request` for a bad name,
   * a hold out of range or a remote the test pack lacks or LIRC cannot send;
   * `not_found` for a key the remote lacks; the transport's
   * `device_unavailable` as it is.
   */
  press(key: string, opts: PressOptions): Promise<void> {
    const holdMs = opts.holdMs ?? 0;
    try {
      checkNames(key, opts.remote);
      if (!Number.isFinite(holdMs) || holdMs < 0 || holdMs > MAX_HOLD_MS) {
        throw invalid(`hold time must be from 0 to ${MAX_HOLD_MS} ms, not ${String(holdMs)}`);
      }
      if (this.o.transport.keyMap) resolveKey(this.o.transport.keyMap, key); // an unknown key is refused before it waits its turn
    } catch (e) {
      return Promise.reject(e);
    }
    const run = this.tail.then(() => this.pressNow(key, opts, holdMs));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async pressNow(key: string, opts: PressOptions, holdMs: number): Promise<void> {
    opts.signal?.throwIfAborted();
    if (this.o.transport.keyMap) return this.pressByName(key, opts, holdMs);
    const { text, remote } = await this.load(opts.testPackSha, opts.remote);
    const encoder = this.encoderFor(opts.remote, text, remote);
    const code = encoder.code(key); // not_found before anything is sent
    const repeats = holdMs > 0 ? repeatsFor(remote, code.name, holdMs) : 0;
    opts.signal?.throwIfAborted();
    const t = this.o.transport;
    if (opts.untilReleased && holdMs > 0 && (t.holdKey || t.holdTrains)) {
      this.o.logger?.debug({ remote: opts.remote, key: code.name }, 'key held until released');
      const hold = { maxMs: holdMs, ...(opts.signal && { signal: opts.signal }), ...(opts.onDown && { onDown: opts.onDown }) };
      if (t.holdKey) await t.holdKey(remote.name, code.name, hold);
      else await t.holdTrains!(encoder.sendOnce(code.name, 0), { ...hold, key: { remote: opts.remote, key: code.name } });
      return;
    }
    this.o.logger?.debug({ remote: opts.remote, key: code.name, repeats }, 'key press');
    opts.onDown?.();
    if (t.sendKey) {
      // lircd refuses more than 600 repeats (its repeat_max); only remotes with frames under 100 ms get there.
      const capped = Math.min(repeats, LIRCD_MAX_REPEATS);
      await t.sendKey(remote.name, code.name, { repeats: capped, ...(opts.signal && { signal: opts.signal }) });
      return;
    }
    const trains = encoder.sendOnce(code.name, repeats);
    await t.send(trains, { key: { remote: opts.remote, key: code.name }, ...(opts.signal && { signal: opts.signal }) });
  }

  /** A key map's transport: the key by name (no remote file), tapped, held for `holdMs` or until released. */
  private async pressByName(key: string, opts: PressOptions, holdMs: number): Promise<void> {
    const t = this.o.transport;
    const signal = opts.signal && { signal: opts.signal };
    if (opts.untilReleased && holdMs > 0 && t.holdKey) {
      this.o.logger?.debug({ remote: opts.remote, key }, 'key held until released');
      await t.holdKey(opts.remote, key, { maxMs: holdMs, ...signal, ...(opts.onDown && { onDown: opts.onDown }) });
      return;
    }
    this.o.logger?.debug({ remote: opts.remote, key, holdMs }, 'key press');
    opts.onDown?.();
    await t.sendKey!(opts.remote, key, { holdMs, ...signal });
  }

  /** The remote file at a commit, parsed; cached per commit and remote (failures are not cached). */
  private load(sha: string, name: string): Promise<ParsedRemote> {
    const id = `${sha}\0${name}`;
    let p = this.parsed.get(id);
    if (!p) {
      p = this.readAndParse(sha, name);
      p.catch(() => this.parsed.delete(id));
      if (this.parsed.size >= PARSE_CACHE_SIZE) this.parsed.delete(this.parsed.keys().next().value!);
      this.parsed.set(id, p);
    }
    return p;
  }

  private async readAndParse(sha: string, name: string): Promise<ParsedRemote> {
    const file = remoteFile(name);
    const text = await this.o.testPack.readFile(sha, file);
    if (text === undefined) throw invalid(`unknown remote control "${name}": no ${file} in the test pack at ${sha.slice(0, 10)}`);
    return { text, remote: pickRemote(parseLircConfig(text, `${name}.lircd.conf`), name) };
  }

  /** The remote's encoder; a new one (fresh toggle state) only when the file's text changed. */
  private encoderFor(name: string, text: string, remote: LircRemote): LircEncoder {
    const kept = this.encoders.get(name);
    if (kept && kept.text === text) return kept.encoder;
    const encoder = new LircEncoder(remote);
    this.encoders.set(name, { text, encoder });
    return encoder;
  }
}

function checkNames(key: string, remote: string): void {
  if (typeof remote !== 'string' || !REMOTE_NAME.test(remote)) {
    throw invalid(`remote control name ${JSON.stringify(remote)} is not a file name (letters, digits, . _ + -)`);
  }
  if (typeof key !== 'string' || !KEY_NAME.test(key)) {
    throw invalid(`key name ${JSON.stringify(key)} must be one word of printable ASCII, e.g. KEY_OK`);
  }
}

/** The remote of a file: the one named like the file (case-insensitive), else the first. */
function pickRemote(remotes: LircRemote[], name: string): LircRemote {
  const wanted = name.toLowerCase();
  const r = remotes.find((x) => x.name.toLowerCase() === wanted) ?? remotes[0];
  if (!r) throw invalid(`${remoteFile(name)} defines no remote`);
  return r;
}

const trainUs = (trains: readonly IrTrain[]): number =>
  trains.reduce((sum, t) => sum + t.durations.reduce((a, b) => a + b, 0) + t.gap, 0);

/**
 * How many repeats (`sendOnce(key, repeats)`) keep a key pressed for at
 * least `holdMs`, gaps included. Lengths come from scratch encoders, so the
 * remote's own encoder keeps its toggle state (a toggle bit changes a length
 * by one bit's worth at most). Up to min_repeat + 1 the count is searched,
 * since LIRC sends max(min_repeat, repeats) there; past it every repeat adds
 * one repeat frame.
 */
export function repeatsFor(remote: LircRemote, key: string, holdMs: number): number {
  const holdUs = holdMs * 1000;
  const total = (reps: number) => trainUs(new LircEncoder(remote).sendOnce(key, reps));
  const linearFrom = Math.max(0, remote.minRepeat) + 1;
  for (let n = 0; n <= linearFrom; n++) if (total(n) >= holdUs) return n;
  const base = total(linearFrom);
  const repeat = total(linearFrom + 1) - base;
  if (repeat <= 0) throw invalid(`key "${key}" of remote "${remote.name}" cannot be held: it has no repeat frame`);
  return linearFrom + Math.ceil((holdUs - base) / repeat);
}
