/**
 * The CEC transport's resident helper: one python3 process per adapter, kept
 * open, that sends CEC messages with the kernel's CEC_TRANSMIT ioctl
 * (linux/cec.h) and answers on a pipe. A press then costs a line written and
 * a line read instead of starting cec-ctl (a process start took 33-66 ms on
 * a loaded node; see docs/remotes.md). Debian's python3 does the ioctls
 * through its `fcntl` module: nothing to build or install.
 *
 * Protocol, one JSON object a line: the helper first says `{"ready": true}`
 * (or `{"error", "message"}` and exits: the device cannot be opened, or is
 * not a CEC device). A request `{"to": 4, "send": [["user-control-pressed",
 * "select"], ["user-control-released"]]}` (cec-ctl's message names and
 * UI command names) is answered `{"sent": [{"msg": "04:44:00", "result":
 * "ok" | "nack" | "failed", "status": "..."}]}`, or with `{"error":
 * "unconfigured"}` when the adapter has no logical address (the caller
 * configures it and asks again), or `{"error": "<errno>", "message"}`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { FarmError } from '../../../core/errors.js';

/** What the helper did with one message. */
export interface CecSent {
  /** The message's bytes in hex, `04:44:00` (header, opcode, operands). */
  msg: string;
  /** `nack`: not acknowledged (a warning); `failed`: another bus error. */
  result: 'ok' | 'nack' | 'failed';
  /** The kernel's transmit status bits in words. */
  status: string;
}

export type CecAnswer = { sent: CecSent[] } | { error: string; message?: string };

/** The helper (python3). Run as `python3 -c CEC_HELPER_PY <device>`. */
export const CEC_HELPER_PY = String.raw`
import errno, fcntl, json, os, struct, sys
G_LOG_ADDRS = 0x805c6103  # _IOR('a', 3, struct cec_log_addrs): 92 bytes
TRANSMIT = 0xc0386105     # _IOWR('a', 5, struct cec_msg): 56 bytes
MSG = struct.Struct('<QQIIII16sBBBBBBBx')
OPCODES = {'user-control-pressed': 0x44, 'user-control-released': 0x45, 'standby': 0x36, 'image-view-on': 0x04}
UI = dict(zip(
    'select up down left right right-up right-down left-up left-down device-root-menu device-setup-menu contents-menu '
    'favorite-menu back media-top-menu media-context-sensitive-menu number-entry-mode number-11 number-12 '
    'number-0-or-number-10 number-1 number-2 number-3 number-4 number-5 number-6 number-7 number-8 number-9 dot enter '
    'clear next-favorite channel-up channel-down previous-channel sound-select input-select display-information help '
    'page-up page-down power volume-up volume-down mute play stop pause record rewind fast-forward eject skip-forward '
    'skip-backward stop-record pause-record angle sub-picture video-on-demand electronic-program-guide '
    'timer-programming initial-configuration select-broadcast-type select-sound-presentation audio-description '
    'internet 3d-mode play-function pause-play-function record-function pause-record-function stop-function '
    'mute-function restore-volume-function tune-function select-media-function select-av-input-function '
    'select-audio-input-function power-toggle-function power-off-function power-on-function f1-blue f2-red f3-green '
    'f4-yellow f5 data'.split(),
    [*range(0x00, 0x0e), 0x10, 0x11, *range(0x1d, 0x2d), *range(0x2f, 0x39), *range(0x40, 0x4f), *range(0x50, 0x5b),
     *range(0x60, 0x6e), *range(0x71, 0x77)]))
STATUS = ['ok', 'arbitration lost', 'not acknowledged', 'low drive', 'error', 'max retries', 'aborted', 'timeout']

def say(obj):
    sys.stdout.write(json.dumps(obj) + '\n')
    sys.stdout.flush()

def logical_address(fd):
    buf = bytearray(92)
    fcntl.ioctl(fd, G_LOG_ADDRS, buf)
    return buf[0] if buf[4] | buf[5] << 8 else None

def encode(initiator, to, words):
    body = bytes([initiator << 4 | to, OPCODES[words[0]]])
    return body + bytes([UI[words[1]]]) if words[0] == 'user-control-pressed' else body

def transmit(fd, body):
    buf = bytearray(MSG.pack(0, 0, len(body), 0, 0, 0, body, 0, 0, 0, 0, 0, 0, 0))
    fcntl.ioctl(fd, TRANSMIT, buf)
    tx = MSG.unpack(buf)[9]
    words = ', '.join(w for i, w in enumerate(STATUS) if tx >> i & 1) or 'no status'
    result = 'ok' if tx & 1 else 'nack' if tx & 0xde == 0x04 else 'failed'
    return {'msg': body.hex(':'), 'result': result, 'status': words}

def answer(fd, request):
    initiator = logical_address(fd)
    if initiator is None:
        return {'error': 'unconfigured'}
    sent = []
    try:
        for words in request['send']:
            sent.append(transmit(fd, encode(initiator, request['to'], words)))
    except OSError as e:
        if e.errno == errno.ENONET and not sent:
            return {'error': 'unconfigured'}
        return {'error': errno.errorcode.get(e.errno, 'EIO'), 'message': 'CEC_TRANSMIT: %s' % e.strerror, 'sent': sent}
    return {'sent': sent}

def main(device):
    try:
        fd = os.open(device, os.O_RDWR)
        logical_address(fd)
    except OSError as e:
        name = errno.errorcode.get(e.errno, 'EIO')
        say({'error': name, 'message': '%s is not a CEC device' % device if e.errno == errno.ENOTTY else 'Failed to open %s: %s' % (device, e.strerror)})
        return 1
    say({'ready': True})
    for line in iter(sys.stdin.readline, ''):
        try:
            say(answer(fd, json.loads(line)))
        except OSError as e:
            say({'error': errno.errorcode.get(e.errno, 'EIO'), 'message': e.strerror})
        except (KeyError, IndexError, TypeError, ValueError) as e:
            say({'error': 'EINVAL', 'message': 'bad request: %r' % (e,)})
    return 0

sys.exit(main(sys.argv[1]))
`;

/**
 * How long the helper may take to start and open the device: the answer timeout, but at least 10 s.
 * Starting python3 touches no bus and takes over a second on a loaded node; a short answer timeout
 * (for a transmit that hangs) must not fail the start.
 */
const startMs = (timeoutMs: number): number => Math.max(timeoutMs, 10_000);

/** One helper process for one device; requests go one at a time (the transport's queue serialises them). */
export class CecHelper {
  private child: ChildProcess | undefined;
  private ready: Promise<void> | undefined;
  private buffered = '';
  private stderr = '';
  private waiter: { resolve: (line: string) => void; reject: (e: unknown) => void } | undefined;
  private readonly lines: string[] = [];

  constructor(
    private readonly device: string,
    private readonly python: string,
    private readonly timeoutMs: number,
  ) {}

  /** Send `msgs` to logical address `to`; starts the helper if it is not running. */
  async send(to: number, msgs: readonly string[][], signal?: AbortSignal): Promise<CecAnswer> {
    await this.started(signal);
    if (this.child?.stdin == null) throw new FarmError('device_unavailable', `the CEC helper for ${this.device} ended`);
    this.child.stdin.write(`${JSON.stringify({ to, send: msgs })}\n`);
    return JSON.parse(await this.nextLine(signal, `the CEC adapter ${this.device} did not finish within ${this.timeoutMs} ms`)) as CecAnswer;
  }

  /** Ends the helper (its stdin closes: it exits); resolves once it is gone. */
  async close(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    const gone = new Promise<void>((resolve) => child.once('close', () => resolve()));
    if (child.exitCode === null && child.signalCode === null) child.stdin?.end();
    const limit = setTimeout(() => child.kill('SIGKILL'), this.timeoutMs);
    await gone;
    clearTimeout(limit);
  }

  private started(signal?: AbortSignal): Promise<void> {
    this.ready ??= this.start(signal).catch((e: unknown) => {
      this.ready = undefined;
      throw e;
    });
    return this.ready;
  }

  private async start(signal?: AbortSignal): Promise<void> {
    const child = spawn(this.python, ['-c', CEC_HELPER_PY, this.device], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.lines.length = 0;
    this.buffered = this.stderr = '';
    const mine = () => this.child === child; // a killed helper's late events are not the new one's
    child.stdout.setEncoding('utf8').on('data', (s: string) => mine() && this.onData(s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => mine() && (this.stderr = (this.stderr + s).slice(-2000)));
    child.stdin.on('error', () => undefined); // a helper that died: its close says why
    child.once('error', (e: NodeJS.ErrnoException) => mine() && this.ended(this.spawnError(e)));
    child.once('close', (code, sig) => mine() && this.ended(`the CEC helper (${this.python}) ended (${sig ?? `code ${code}`})${this.lastStderr()}`));
    const first = JSON.parse(await this.nextLine(signal, `the CEC helper did not start within ${startMs(this.timeoutMs)} ms`, startMs(this.timeoutMs))) as { ready?: boolean; message?: string };
    if (first.ready !== true) {
      this.stop();
      throw new FarmError('device_unavailable', first.message ?? `the CEC helper could not open ${this.device}`);
    }
  }

  private spawnError(e: NodeJS.ErrnoException): string {
    if (e.code === 'ENOENT') return `${this.python} was not found: the CEC remote needs python3 (Debian's python3 package)`;
    return `could not start ${this.python}: ${e.message}`;
  }

  private lastStderr(): string {
    const last = this.stderr.trim().split('\n').pop();
    return last ? `: ${last}` : '';
  }

  private onData(s: string): void {
    this.buffered += s;
    let nl: number;
    while ((nl = this.buffered.indexOf('\n')) >= 0) {
      this.lines.push(this.buffered.slice(0, nl));
      this.buffered = this.buffered.slice(nl + 1);
    }
    if (this.waiter && this.lines.length > 0) this.waiter.resolve(this.lines.shift()!);
  }

  private ended(why: string): void {
    if (this.child === undefined) return;
    this.child = undefined;
    this.ready = undefined;
    this.waiter?.reject(new FarmError('device_unavailable', why));
  }

  /** Kill the helper: the next request starts another (it opens the device afresh). */
  private stop(): void {
    const child = this.child;
    this.child = undefined;
    this.ready = undefined;
    child?.kill('SIGKILL');
  }

  /** The helper's next line; a timeout or an abort kills it (a message stuck in the kernel is not waited for). */
  private nextLine(signal: AbortSignal | undefined, late: string, limitMs = this.timeoutMs): Promise<string> {
    if (this.lines.length > 0) return Promise.resolve(this.lines.shift()!);
    if (this.child === undefined) return Promise.reject(new FarmError('device_unavailable', `the CEC helper for ${this.device} is not running`));
    return new Promise<string>((resolve, reject) => {
      const done = (f: () => void) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiter = undefined;
        f();
      };
      const fail = (e: unknown) => done(() => reject(e));
      const onAbort = () => fail((this.stop(), signal!.reason));
      const timer = setTimeout(() => fail((this.stop(), new FarmError('device_unavailable', late))), limitMs);
      this.waiter = { resolve: (line) => done(() => resolve(line)), reject: fail };
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
