/**
 * systemd's notify protocol (sd_notify) for `Type=notify` with a watchdog.
 *
 * Node cannot send on an AF_UNIX datagram socket, and a short-lived sender
 * (`systemd-notify`) races with the service manager, which may drop a message
 * whose sender has already exited. So one small long-lived Python helper
 * (python3 is a dependency of the test runner anyway) relays each line it
 * reads on stdin as one datagram to $NOTIFY_SOCKET. Unit: NotifyAccess=all.
 * Without NOTIFY_SOCKET (not under systemd) everything here is a no-op.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '../core/ports.js';

const RELAY = [
  'import os, socket, sys',
  'addr = os.environ["NOTIFY_SOCKET"]',
  'if addr.startswith("@"): addr = "\\0" + addr[1:]',
  's = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)',
  'for line in sys.stdin:',
  '    s.sendto(line.rstrip("\\n").replace("\\\\n", "\\n").encode(), addr)',
].join('\n');

export class SdNotify {
  private relay: ChildProcess | undefined;
  private watchdog: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly env: NodeJS.ProcessEnv = process.env,
    private readonly python = '/usr/bin/python3',
  ) {}

  get enabled(): boolean {
    return !!this.env.NOTIFY_SOCKET;
  }

  /** READY=1, then WATCHDOG=1 at half the interval systemd asks for (WATCHDOG_USEC). */
  ready(status: string, healthy: () => boolean = () => true): void {
    if (!this.enabled) return;
    this.send(`READY=1\nSTATUS=${status}\nMAINPID=${process.pid}`);
    const usec = Number(this.env.WATCHDOG_USEC);
    const forUs = !this.env.WATCHDOG_PID || Number(this.env.WATCHDOG_PID) === process.pid;
    if (usec > 0 && forUs) {
      // A blocked event loop stops the pings, and systemd restarts the daemon: that is the point.
      this.watchdog = setInterval(() => {
        if (healthy()) this.send('WATCHDOG=1');
      }, Math.max(500, usec / 2000));
      this.watchdog.unref();
    }
  }

  /** STOPPING=1 with an extended timeout while a running test finishes its bookkeeping. */
  stopping(extendSecs?: number): void {
    if (!this.enabled) return;
    this.send(`STOPPING=1${extendSecs ? `\nEXTEND_TIMEOUT_USEC=${Math.round(extendSecs * 1e6)}` : ''}`);
  }

  close(): void {
    clearInterval(this.watchdog);
    this.relay?.stdin?.end();
    this.relay = undefined;
  }

  private send(message: string): void {
    if (!this.relay) {
      this.relay = spawn(this.python, ['-c', RELAY], { stdio: ['pipe', 'ignore', 'inherit'], env: this.env });
      this.relay.on('error', (e) => this.logger.warn({ err: e }, 'sd_notify relay failed; systemd will not hear from farmhand'));
      this.relay.unref();
      (this.relay.stdin as unknown as { unref?: () => void })?.unref?.();
    }
    // One line per datagram; newlines inside a message travel as a literal "\n".
    this.relay.stdin?.write(`${message.replaceAll('\n', '\\n')}\n`);
  }
}
