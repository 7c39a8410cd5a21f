/** A stand-in for systemd's notify socket: a real AF_UNIX datagram socket (python3), each message collected. */
import { spawn, type ChildProcess } from 'node:child_process';

export interface NotifySocket {
  child: ChildProcess;
  /** The datagrams received so far, in order. */
  messages: string[];
}

/** Bind the socket at `socketPath`; resolves once it is bound. Kill `child` to close it. */
export function notifySocket(socketPath: string): Promise<NotifySocket> {
  const script = [
    'import json, socket',
    's = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)',
    `s.bind(${JSON.stringify(socketPath)})`,
    'print("ready", flush=True)',
    'while True:',
    '    print(json.dumps(s.recv(4096).decode()), flush=True)',
  ].join('\n');
  const child = spawn('/usr/bin/python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const messages: string[] = [];
  return new Promise((resolve) => {
    let buf = '';
    child.stdout.on('data', (b: Buffer) => {
      buf += b.toString();
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) {
        const line = buf.slice(0, i);
        if (line === 'ready') resolve({ child, messages });
        else messages.push(JSON.parse(line) as string);
      }
    });
  });
}
