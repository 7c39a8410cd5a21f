/**
 * `farmhand ir encode <file> <KEY>... [--remote <name>] [--count <n>]`:
 * prints the pulse/space train LIRC would send, in irsimsend's format, so the
 * output can be diffed with `irsimsend -c <n> -l <keys> <file>`.
 *
 * Without --remote the remote is the one irsimsend uses: the first in LIRC's
 * load order (non-raw remotes first, fewest bits first).
 */
import { readFile } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { FarmError, isFarmError } from '../../../core/errors.js';
import { encode } from './encoder.js';
import { formatIrsimsend } from './format.js';
import { lircOrder, parseLircConfig } from './parse.js';
import type { LircRemote } from './types.js';

const USAGE = 'usage: farmhand ir encode <file> <KEY>... [--remote <name>] [--count <n>]\n';

/** Exit codes: 0 done, 1 the file or a key cannot be encoded, 2 bad usage. */
export async function irEncodeCommand(
  argv: string[],
  out: Writable,
  err: Writable = process.stderr,
): Promise<number> {
  let args;
  try {
    args = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { remote: { type: 'string' }, count: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (e) {
    err.write(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = args;
  if (values.help) {
    out.write(USAGE);
    return 0;
  }
  const [file, ...keys] = positionals;
  const count = values.count === undefined ? 1 : Number(values.count);
  if (file === undefined || keys.length === 0 || !Number.isInteger(count) || count < 1) {
    err.write(`${values.count !== undefined && !(count >= 1) ? '--count must be a whole number >= 1\n' : ''}${USAGE}`);
    return 2;
  }
  try {
    const remotes = parseLircConfig(await readFile(file, 'utf8'), file);
    const remote = pickRemote(remotes, values.remote, file);
    out.write(formatIrsimsend(encode(remote, keys, { count })));
    return 0;
  } catch (e) {
    if (isFarmError(e) || (e as NodeJS.ErrnoException).code === 'ENOENT') {
      err.write(`farmhand ir encode: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  }
}

function pickRemote(remotes: LircRemote[], name: string | undefined, file: string): LircRemote {
  if (name === undefined) return lircOrder(remotes)[0]!;
  const found = remotes.find((r) => r.name.toLowerCase() === name.toLowerCase());
  if (found) return found;
  const names = remotes.map((r) => r.name).join(', ');
  throw new FarmError('not_found', `${file}: no remote "${name}" (remotes: ${names})`, { file });
}
