/**
 * A model of a whole `irsimsend` run (LIRC 0.10 tools/irsimsend.cpp): what it
 * writes to `simsend.out` for a file, with every key of every remote
 * (`irsimsend -c N file`) or the keys of a list file (`-l list`). The
 * differential tests compare this with the real program; it also documents
 * the tool's own rules, which are not the encoder's:
 *
 * - all keys: every remote in LIRC's load order, every button in file order;
 * - a list: keys are looked up in the first remote only; an unknown key is
 *   skipped ("Illegal keycode"); each line is read with
 *   `sscanf("%*x %*x %32s %*s")` first, so `cd-dvd` is read as `vd`;
 * - a remote without timings writes `code <value>` lines; GRUNDIG, SERIAL
 *   and BO remotes write nothing; a value with the LIRC_EOF bit ends the run.
 */
import { FarmError } from '../../../core/errors.js';
import { LircEncoder, LircSession } from './encoder.js';
import { formatIrsimsend } from './format.js';
import { lircOrder } from './parse.js';
import { Flag, PROTOCOL_MASK, type LircCode, type LircRemote } from './types.js';

const LIRC_EOF = 0x08000000;

class EndOfRun extends Error {}

/** Options of one simulated run. */
export interface SimsendOptions {
  /** `-c`: sends per key (press plus count - 1 repeats). */
  count?: number;
  /** `-k`: one key, looked up in the first remote (an unknown key sends nothing). */
  keysym?: string;
  /** `-l`: the lines of the list file. Without `keysym` or `list`: every key of every remote. */
  list?: readonly string[];
}

/** The key name irsimsend reads from one line of a list file. */
export function listFileKey(line: string): string | undefined {
  const hex = /^[ \t\n\v\f\r]*[+-]?(?:0[xX](?=[0-9a-fA-F]))?[0-9a-fA-F]+/;
  const first = hex.exec(line);
  const second = first && hex.exec(line.slice(first[0].length));
  if (first && second) {
    const rest = line.slice(first[0].length + second[0].length);
    const word = /^[ \t\n\v\f\r]*([^ \t\n\v\f\r]{1,32})/.exec(rest);
    if (word) return word[1];
  }
  return /^[ \t\n\v\f\r]*([^ \t\n\v\f\r]{1,32})/.exec(line)?.[1];
}

/** The `simsend.out` text of an irsimsend run over `remotes` (in file order). */
export function simulateIrsimsend(remotes: readonly LircRemote[], opts: SimsendOptions = {}): string {
  const session = new LircSession(remotes);
  const count = opts.count ?? 1;
  const out: string[] = [];
  const encoders = new Map<LircRemote, LircEncoder | undefined>();
  const press = (r: LircRemote, code: LircCode) => {
    if (!encoders.has(r)) encoders.set(r, transmittable(r) ? new LircEncoder(r, { session }) : undefined);
    const enc = encoders.get(r);
    if (enc) return enc.simsendEach(code, count, (t) => t instanceof FarmError || out.push(formatIrsimsend([t])));
    if (r.zero.pulse === 0 && r.zero.space === 0 && !(r.flags & Flag.RAW_CODES)) codeLines(code, count, out);
    session.remember(code.name);
  };
  try {
    const ordered = lircOrder(remotes);
    const first = ordered[0]!;
    const lookup = (key: string | undefined) => first.codes.find((c) => c.name.toLowerCase() === key?.toLowerCase());
    if (opts.keysym !== undefined) {
      const code = lookup(opts.keysym);
      if (code) press(first, code);
    } else if (opts.list !== undefined) {
      for (const line of opts.list) {
        const code = lookup(listFileKey(line));
        if (code) press(first, code);
      }
    } else {
      for (const r of ordered) for (const c of r.codes) press(r, c);
    }
  } catch (e) {
    if (!(e instanceof EndOfRun)) throw e;
  }
  return out.join('');
}

function transmittable(r: LircRemote): boolean {
  const p = r.flags & PROTOCOL_MASK;
  if (p === Flag.GRUNDIG || p === Flag.SERIAL || p === Flag.BO) return false;
  return !(r.zero.pulse === 0 && r.zero.space === 0 && !(r.flags & Flag.RAW_CODES));
}

/** The file driver's `code <int>` line for a remote without timings. */
function codeLines(code: LircCode, count: number, out: string[]): void {
  const value = Number(BigInt.asIntN(32, code.codes[0] ?? 0n));
  for (let i = 0; i < Math.max(count, 1); i++) {
    out.push(`code ${value}\n`);
    if (value & LIRC_EOF) throw new EndOfRun();
  }
}
