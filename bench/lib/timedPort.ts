/**
 * A serialport class for the IR benchmarks that reports when each write that
 * ends an IR Toy data block (0xFF 0xFF) has completed: the "last byte written
 * to the serial port" the targets are measured to.
 */
import { SerialPort } from 'serialport';
import type { PortLike } from '../../src/hardware/ir/transports/irtoy.js';

export function timedPortClass(onBlockWritten: () => void) {
  return class TimedPort implements PortLike {
    private readonly p: SerialPort;
    constructor(opts: { path: string; baudRate: number; autoOpen: false }) {
      this.p = new SerialPort(opts);
    }
    get isOpen(): boolean {
      return this.p.isOpen;
    }
    open(cb: (err: Error | null) => void): void {
      this.p.open(cb);
    }
    write(data: Buffer, cb: (err: Error | null | undefined) => void): boolean {
      const ends = data.length >= 2 && data[data.length - 1] === 0xff && data[data.length - 2] === 0xff;
      return this.p.write(data, (err) => {
        if (ends) onBlockWritten();
        cb(err);
      });
    }
    close(cb?: (err: Error | null) => void): void {
      this.p.close(cb);
    }
    on(event: string, listener: (...args: never[]) => void): this {
      this.p.on(event, listener as (...args: unknown[]) => void);
      return this;
    }
    removeAllListeners(): this {
      this.p.removeAllListeners();
      return this;
    }
  };
}
