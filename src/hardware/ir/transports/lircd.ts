/**
 * `lircd:/run/lirc/lircd`: a running lircd, over its unix socket. lircd
 * encodes keys itself from the remotes it has loaded, so this transport sends
 * by remote and key name (`SEND_ONCE remote key [repeats]`), one connection
 * per command as `irsend` does, which survives lircd restarts. A key held
 * until released (stbt's `pressing`) is `SEND_START remote key`, then
 * `SEND_STOP remote key` on release: lircd repeats the key in between, so the
 * repeats end when the hold does. lircd has no
 * command for raw pulse trains, so `send(trains)` is refused.
 *
 * Reply format: `BEGIN`, the command echoed, `SUCCESS` or `ERROR`, optionally
 * `DATA`, a line count and that many lines, then `END`. lircd also writes
 * button events and `BEGIN SIGHUP END` broadcasts to every client; those are
 * skipped.
 */
import { createConnection } from 'node:net';
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { silentLogger } from '../../../logger.js';
import { SerialQueue, abortable, heldUntil } from './async.js';
import type { HoldOptions, IrTrain, IrTransport, SendKeyOptions, SendOptions } from './types.js';

/** lircd's reply to one command. */
export interface LircdReply {
  success: boolean;
  data: string[];
}

type ParseState = 'idle' | 'echo' | 'skip' | 'status' | 'afterStatus' | 'count' | 'data' | 'end';

/**
 * Reads lircd's output line by line and picks out the reply to one command.
 * Feed it text as it arrives; `reply` is set once the reply's `END` is read.
 */
export class LircdReplyParser {
  reply: LircdReply | undefined;
  private state: ParseState = 'idle';
  private partial = '';
  private success = false;
  private data: string[] = [];
  private wanted = 0;

  constructor(private readonly command: string) {}

  push(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) {
      if (this.reply) return;
      this.line(line.replace(/\r$/, ''));
    }
  }

  private line(line: string): void {
    switch (this.state) {
      case 'idle': // button events between packets are ignored
        if (line === 'BEGIN') this.state = 'echo';
        return;
      case 'echo': // a broadcast (SIGHUP) or another client's packet is skipped
        this.state = line === this.command ? 'status' : 'skip';
        return;
      case 'skip':
        if (line === 'END') this.state = 'idle';
        return;
      case 'status':
        this.success = line === 'SUCCESS';
        this.state = line === 'SUCCESS' || line === 'ERROR' ? 'afterStatus' : 'skip';
        return;
      case 'afterStatus':
        if (line === 'DATA') this.state = 'count';
        else if (line === 'END') this.finish();
        return;
      case 'count':
        this.wanted = Number.parseInt(line, 10) || 0;
        this.state = this.wanted > 0 ? 'data' : 'end';
        return;
      case 'data':
        this.data.push(line);
        if (this.data.length >= this.wanted) this.state = 'end';
        return;
      case 'end':
        if (line === 'END') this.finish();
        return;
    }
  }

  private finish(): void {
    this.reply = { success: this.success, data: this.data };
  }
}

export interface LircdOptions {
  /** How long lircd may take to answer (it answers after sending the IR); default 5000 ms. */
  timeoutMs?: number;
  logger?: Logger;
}

/** A name lircd can take as one word of a command line. */
const NAME = /^[^\s]{1,200}$/;

export class LircdTransport implements IrTransport {
  readonly uri: string;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly queue = new SerialQueue();
  private closed = false;

  constructor(
    readonly socketPath = '/run/lirc/lircd',
    opts: LircdOptions = {},
  ) {
    this.uri = `lircd:${socketPath}`;
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.log = (opts.logger ?? silentLogger).child({ ir: this.uri });
  }

  /** Refused: lircd has no command for raw trains; callers use `sendKey`. */
  send(_trains: readonly IrTrain[], _opts?: SendOptions): Promise<void> {
    return Promise.reject(
      new FarmError('device_unavailable', `${this.uri} sends keys by name (SEND_ONCE); it cannot send raw pulse trains`),
    );
  }

  /** `SEND_ONCE remote key [repeats]`; lircd's error message becomes the FarmError's message. */
  async sendKey(remote: string, key: string, opts: SendKeyOptions = {}): Promise<void> {
    const repeats = opts.repeats ?? 0;
    if (!NAME.test(remote) || !NAME.test(key)) {
      throw new FarmError('invalid_request', 'remote and key names must be single words without spaces');
    }
    if (!Number.isInteger(repeats) || repeats < 0 || repeats > 600) {
      throw new FarmError('invalid_request', 'repeats must be an integer from 0 to 600');
    }
    const command = `SEND_ONCE ${remote} ${key}${repeats > 0 ? ` ${repeats}` : ''}`;
    await this.command(command, opts.signal);
  }

  /**
   * Hold a key: `SEND_START`, wait for the release (or `maxMs`), `SEND_STOP`.
   * The stop is sent even when the release comes while the start is being
   * answered, so lircd is never left repeating. lircd itself also stops after
   * its repeat_max (600) repeats: 65 s for an NEC remote, less for remotes
   * with shorter frames.
   */
  async holdKey(remote: string, key: string, opts: HoldOptions): Promise<void> {
    if (!NAME.test(remote) || !NAME.test(key)) {
      throw new FarmError('invalid_request', 'remote and key names must be single words without spaces');
    }
    opts.signal?.throwIfAborted();
    await this.command(`SEND_START ${remote} ${key}`);
    try {
      opts.onDown?.();
      await heldUntil(opts.maxMs, opts.signal);
    } finally {
      await this.command(`SEND_STOP ${remote} ${key}`);
    }
  }

  /**
   * Any lircd command (`VERSION`, `LIST`, `LIST <remote>`); resolves with its
   * DATA lines. ERROR answers reject: an unknown remote or key is
   * `invalid_request`, anything else `device_unavailable`.
   */
  async command(command: string, signal?: AbortSignal): Promise<string[]> {
    return this.queue.run(async () => {
      if (this.closed) throw new FarmError('device_unavailable', `${this.uri} is closed`);
      const reply = await this.exchange(command, signal);
      if (reply.success) return reply.data;
      const why = reply.data.join(' ') || 'no reason given';
      this.log.warn({ command, why }, 'lircd refused a command');
      const code = /^unknown (remote|command)/.test(why) ? 'invalid_request' : 'device_unavailable';
      throw new FarmError(code, `lircd refused "${command}": ${why}`, { socket: this.socketPath });
    }, signal);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue.idle();
  }

  /** One connection: write the command, read until its reply, hang up. */
  private exchange(command: string, signal?: AbortSignal): Promise<LircdReply> {
    const sock = createConnection(this.socketPath);
    const parser = new LircdReplyParser(command);
    const done = new Promise<LircdReply>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(this.unavailable(`did not answer "${command}" within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      sock.setEncoding('utf8');
      sock.on('connect', () => sock.write(`${command}\n`));
      sock.on('data', (text: string) => {
        parser.push(text);
        if (parser.reply) resolve(parser.reply);
      });
      sock.on('error', (e: NodeJS.ErrnoException) => reject(this.unavailable(`cannot be reached: ${e.code ?? e.message}`)));
      sock.on('close', () => reject(this.unavailable(`closed the connection before answering "${command}"`)));
      sock.on('close', () => clearTimeout(timer));
    });
    return abortable(done, signal).finally(() => sock.destroy());
  }

  private unavailable(what: string): FarmError {
    return new FarmError('device_unavailable', `lircd at ${this.socketPath} ${what}`, { socket: this.socketPath });
  }
}
