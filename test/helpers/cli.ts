/** Run a command's entry point in this process with captured output, as the real command would print it. */
import { PassThrough, type Writable } from 'node:stream';

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/** `command(argv, out, err)` resolving with an exit status, e.g. `tokenCommand` or `irEncodeCommand`. */
export type CliEntry = (argv: string[], out: Writable, err: Writable) => Promise<number>;

export async function runCaptured(command: CliEntry, argv: string[]): Promise<CliRun> {
  let out = '';
  let err = '';
  const o = new PassThrough().on('data', (d: Buffer) => (out += d.toString()));
  const e = new PassThrough().on('data', (d: Buffer) => (err += d.toString()));
  const code = await command(argv, o, e);
  return { code, out, err };
}
