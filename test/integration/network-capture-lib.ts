/**
 * A stand-in for an HDMI-over-IP encoder on loopback: a real ffmpeg encoding a test pattern to H.264
 * in MPEG-TS and sending it over udp://, srt:// (as the SRT listener, the encoder's usual role) or
 * http:// (ffmpeg's own one-client HTTP server, `-listen 1`). Killing it and starting another at a new
 * size is what an encoder does on every mode change. Shared by the network capture tests and the bench.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

export type SenderProtocol = 'udp' | 'srt' | 'http';

export interface Sender {
  readonly proc: ChildProcess;
  /** Settles when the process has ended. */
  readonly exited: Promise<void>;
  /** The last lines it wrote to stderr (for a failure message). */
  stderr(): string;
  /** End it (KILL: an encoder that loses power or restarts says goodbye to nobody); resolves once it is gone. */
  kill(): Promise<void>;
}

/** The encoder's keyframe interval in frames (0.5 s at 25 fps): HDMI-over-IP encoders use short GOPs. */
export const SENDER_GOP = 12;

/** The URL the sender writes to, and the capture.uri a node reads it from. */
export function senderUrls(protocol: SenderProtocol, port: number): { send: string; read: string; outputArgs: string[] } {
  switch (protocol) {
    case 'udp':
      return { send: `udp://127.0.0.1:${port}?pkt_size=1316`, read: `udp://127.0.0.1:${port}`, outputArgs: [] };
    case 'srt':
      return { send: `srt://127.0.0.1:${port}?mode=listener`, read: `srt://127.0.0.1:${port}`, outputArgs: [] };
    case 'http':
      return { send: `http://127.0.0.1:${port}/live.ts`, read: `http://127.0.0.1:${port}/live.ts`, outputArgs: ['-listen', '1'] };
  }
}

/**
 * Start an encoder stand-in sending `width`x`height` at 25 fps to `url`: the moving test pattern, or a
 * plain `color` (a picture that tells this sender's frames from another's).
 */
export function startSender(url: string, width: number, height: number, outputArgs: string[] = [], color?: string): Sender {
  const proc = spawn('ffmpeg', [
    '-hide_banner', '-nostdin', '-loglevel', 'error',
    '-re', '-f', 'lavfi', '-i', `${color === undefined ? 'testsrc2=' : `color=c=${color}:`}size=${width}x${height}:rate=25`,
    '-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-pix_fmt', 'yuv420p',
    '-g', String(SENDER_GOP), '-f', 'mpegts', ...outputArgs, url,
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.setEncoding('utf8').on('data', (s: string) => (err = (err + s).slice(-2000)));
  const exited = new Promise<void>((resolve) => proc.once('close', () => resolve()));
  return {
    proc,
    exited,
    stderr: () => err,
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** A port nothing listens on now (the kernel's choice), for UDP or TCP (SRT runs over UDP). */
export async function freePort(kind: 'udp' | 'tcp'): Promise<number> {
  if (kind === 'udp') {
    const sock = createSocket('udp4');
    await new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', resolve));
    const { port } = sock.address();
    await new Promise<void>((resolve) => sock.close(() => resolve()));
    return port;
  }
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export function portKind(protocol: SenderProtocol): 'udp' | 'tcp' {
  return protocol === 'http' ? 'tcp' : 'udp';
}
