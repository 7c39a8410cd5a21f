/**
 * An Android device for tests, as far as adb sees one over the network: a
 * TCP listener speaking adb's transport protocol (the CNXN / OPEN / OKAY /
 * WRTE / CLSE messages of adbd, 24-byte little-endian headers), so a real
 * adb server reaches it with `adb connect 127.0.0.1:<port>`. It runs no
 * shell: it records each `shell:` service it is asked to open and answers
 * `input keyevent ...` with nothing (as Android does), anything else with
 * `mode`'s output. No AUTH is asked (a device with debugging authorised).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

const A_CNXN = 0x4e584e43;
const A_OPEN = 0x4e45504f;
const A_OKAY = 0x59414b4f;
const A_CLSE = 0x45534c43;
const A_WRTE = 0x45545257;
const A_VERSION = 0x01000001;
const MAX_PAYLOAD = 256 * 1024;

export type FakeDeviceMode = 'ok' | 'no-input' | 'silent';

export interface FakeAdbDevice {
  /** `127.0.0.1:<port>`: the serial adb knows it by once connected. */
  serial: string;
  port: number;
  /** The shell commands run so far. */
  commands: string[];
  mode: FakeDeviceMode;
  close(): Promise<void>;
}

function message(command: number, arg0: number, arg1: number, data: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(24);
  h.writeUInt32LE(command, 0);
  h.writeUInt32LE(arg0, 4);
  h.writeUInt32LE(arg1, 8);
  h.writeUInt32LE(data.length, 12);
  h.writeUInt32LE(data.reduce((a, b) => (a + b) >>> 0, 0), 16);
  h.writeUInt32LE((command ^ 0xffffffff) >>> 0, 20);
  return Buffer.concat([h, data]);
}

interface Packet {
  command: number;
  arg0: number;
  arg1: number;
  data: Buffer;
}

/** Splits the byte stream into packets. */
function packets(onPacket: (p: Packet) => void): (chunk: Buffer) => void {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 24) {
      const len = buf.readUInt32LE(12);
      if (buf.length < 24 + len) return;
      onPacket({ command: buf.readUInt32LE(0), arg0: buf.readUInt32LE(4), arg1: buf.readUInt32LE(8), data: buf.subarray(24, 24 + len) });
      buf = buf.subarray(24 + len);
    }
  };
}

export async function startFakeAdbDevice(): Promise<FakeAdbDevice> {
  const sockets = new Set<net.Socket>();
  const fake = { commands: [] as string[], mode: 'ok' } as FakeAdbDevice;
  let nextId = 1;
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    const pending = new Map<number, Buffer>(); // our stream id -> output still to write once the OKAY comes
    sock.on('data', packets((p) => {
      if (p.command === A_CNXN) {
        sock.write(message(A_CNXN, A_VERSION, MAX_PAYLOAD, Buffer.from('device::ro.product.name=farmhand_fake;ro.product.model=Fake_TV;ro.product.device=fake;features=\0')));
      } else if (p.command === A_OPEN) {
        const service = p.data.toString('utf8').replace(/\0$/, '');
        const id = nextId++;
        const cmd = service.replace(/^shell:/, '');
        fake.commands.push(cmd);
        if (fake.mode === 'silent') return;
        sock.write(message(A_OKAY, id, p.arg0));
        const out = /^input keyevent /.test(cmd) && fake.mode === 'ok' ? '' : `/system/bin/sh: ${cmd.split(' ')[0]}: inaccessible or not found\n`;
        if (out) {
          pending.set(id, Buffer.from(out));
          sock.write(message(A_WRTE, id, p.arg0, Buffer.from(out)));
        } else {
          sock.write(message(A_CLSE, id, p.arg0));
        }
      } else if (p.command === A_OKAY && pending.has(p.arg1)) {
        pending.delete(p.arg1); // the server took our output: the command has ended
        sock.write(message(A_CLSE, p.arg1, p.arg0));
      } else if (p.command === A_WRTE) {
        sock.write(message(A_OKAY, p.arg1, p.arg0));
      }
    }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.port = (server.address() as AddressInfo).port;
  fake.serial = `127.0.0.1:${fake.port}`;
  fake.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return fake;
}
