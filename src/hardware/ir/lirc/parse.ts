/**
 * Reads `lircd.conf` text into remotes, accepting and refusing exactly what
 * LIRC 0.10's read_config() does (lib/config_file.c), so a file that works
 * with lircd works here and a file lircd rejects is rejected with the file
 * and line named.
 *
 * LIRC quirks kept on purpose: only a `#` in column 0 starts a comment (an
 * indented `#` is a parse error in LIRC too); `flags A | B` with spaces reads
 * only `A`; lines with two or more words outside `begin remote` are ignored;
 * REVERSE reverses only a button's first code; a one-bit toggle_bit_mask
 * starts from the first button's bit.
 */
import { FarmError } from '../../../core/errors.js';
import { bit64, genMask, parseCode, parseU32, reverseBits } from './cint.js';
import { applyDefinition, newRemote } from './definitions.js';
import { Flag, PROTOCOL_MASK, type LircCode, type LircRemote } from './types.js';

type Mode = 'none' | 'remote' | 'codes' | 'raw_codes' | 'raw_name';

/** LIRC reads lines with fgets into a 4096-byte buffer. */
const LINE_LEN = 4096;

/** A `FarmError('invalid_request')` naming the file and line. */
export function configError(file: string, line: number, message: string): FarmError {
  return new FarmError('invalid_request', `${file}:${line}: ${message}`, { file, line });
}

/** Remote under construction, plus what only the parser needs. */
interface Draft {
  remote: LircRemote;
  toggleBit: number;
  codesDefined: boolean;
}

class ConfigParser {
  private mode: Mode = 'none';
  private line = 0;
  private readonly remotes: Draft[] = [];
  private current: Draft | undefined;
  private codes: LircCode[] = [];
  private raw: LircCode | undefined;

  constructor(private readonly file: string) {}

  private fail(message: string): never {
    throw configError(this.file, this.line, message);
  }

  parse(text: string): LircRemote[] {
    for (const raw of splitLines(text)) {
      this.line++;
      const buf = raw.endsWith('\n') ? raw.slice(0, -1).replace(/\r$/, '') : raw;
      if (buf.startsWith('#')) continue;
      const tokens = buf.split(/[ \t]+/).filter((t) => t.length > 0);
      if (tokens.length > 0) this.handle(tokens);
    }
    if (this.mode !== 'none') this.fail('unexpected end of file (missing "end remote"?)');
    if (this.remotes.length === 0) throw configError(this.file, this.line, 'no "begin remote" block');
    return this.remotes.map((d) => finish(d));
  }

  private handle(tokens: string[]): void {
    const [key, val] = tokens as [string, string | undefined];
    if (val === undefined) {
      if (this.mode === 'raw_name') return this.addSignal(key);
      this.fail(`"${key}" alone is not valid here`);
    }
    const lower = key.toLowerCase();
    if (lower === 'include') this.fail('"include" is not supported; put every remote in one file');
    else if (lower === 'begin') this.begin(tokens, val);
    else if (lower === 'end') this.end(tokens, val);
    else if (this.mode === 'remote') this.define(tokens);
    else if (this.mode === 'codes') this.defineCode(tokens);
    else if (this.mode === 'raw_codes' || this.mode === 'raw_name') this.rawLine(tokens);
    // Mode 'none': LIRC silently ignores lines of two or more words here.
  }

  private checkMode(want: Mode, what: string): void {
    if (this.mode !== want) this.fail(`"${what}" isn't valid at this position`);
  }

  private draft(): Draft {
    if (!this.current) this.fail('no remote is open');
    return this.current;
  }

  private begin(tokens: string[], val: string): void {
    const section = val.toLowerCase();
    if (section === 'codes' || section === 'raw_codes') {
      this.checkMode('remote', `begin ${val}`);
      const d = this.draft();
      if (d.codesDefined) this.fail('codes are already defined');
      this.codes = [];
      if (section === 'raw_codes') {
        d.remote.flags = (d.remote.flags & ~PROTOCOL_MASK) | Flag.RAW_CODES;
      }
      this.mode = section === 'codes' ? 'codes' : 'raw_codes';
    } else if (section === 'remote') {
      this.checkMode('none', 'begin remote');
      this.current = { remote: newRemote(this.file, this.line), toggleBit: 0, codesDefined: false };
      this.remotes.push(this.current);
      this.mode = 'remote';
    } else if (this.mode === 'codes') {
      this.defineCode(tokens);
    } else {
      this.fail(`unknown section "${val}"`);
    }
  }

  private end(tokens: string[], val: string): void {
    const section = val.toLowerCase();
    if (section === 'codes') {
      this.checkMode('codes', 'end codes');
      this.closeCodes();
    } else if (section === 'raw_codes') {
      if (this.mode === 'raw_name') this.closeRaw();
      this.checkMode('raw_codes', 'end raw_codes');
      this.closeCodes();
    } else if (section === 'remote') {
      this.checkMode('remote', 'end remote');
      sanityCheck(this.draft(), this.fail.bind(this));
      this.mode = 'none';
    } else if (this.mode === 'codes') {
      this.defineCode(tokens);
    } else {
      this.fail(`unknown section "${val}"`);
    }
  }

  private closeCodes(): void {
    const d = this.draft();
    d.remote.codes = this.codes;
    d.codesDefined = true;
    this.mode = 'remote';
  }

  private define(tokens: string[]): void {
    const d = this.draft();
    const err = applyDefinition(d.remote, tokens, (bit) => (d.toggleBit = bit));
    if (err !== undefined) this.fail(err);
  }

  private defineCode(tokens: string[]): void {
    const [name, ...values] = tokens as [string, ...string[]];
    const codes: bigint[] = [];
    for (const [i, v] of values.entries()) {
      if (i > 0 && v.startsWith('#')) break; // the rest of the line is a comment
      const code = parseCode(v);
      if (code === undefined) this.fail(`"${v}": must be a valid (uint64_t) number`);
      codes.push(code);
    }
    this.codes.push({ name, line: this.line, codes });
  }

  private rawLine(tokens: string[]): void {
    const [key, val] = tokens as [string, string];
    if (key.toLowerCase() === 'name') {
      if (this.mode === 'raw_name') this.closeRaw();
      this.raw = { name: val, line: this.line, codes: [], signals: [] };
      this.mode = 'raw_name';
      return;
    }
    if (this.mode === 'raw_codes') this.fail('no name for signal (expected "name <button>")');
    for (const t of tokens) this.addSignal(t);
  }

  private addSignal(token: string): void {
    // s_strtoui: an unsigned int, then stored in a lirc_t.
    const v = parseU32(token, true);
    if (v === undefined) this.fail(`"${token}": must be a valid (unsigned int) number`);
    this.raw?.signals?.push(v);
  }

  private closeRaw(): void {
    const raw = this.raw;
    if (!raw?.signals) return;
    if (raw.signals.length % 2 === 0) {
      this.fail(`bad signal length: button "${raw.name}" must end with a pulse (odd count)`);
    }
    this.codes.push(raw);
    this.raw = undefined;
    this.mode = 'raw_codes';
  }
}

/**
 * Split as fgets(buf, 4096) reads: each line keeps its '\n', and a line longer
 * than 4095 characters comes back in pieces that LIRC parses as lines of
 * their own (its "line too long" check can never fire).
 */
function splitLines(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split(/(?<=\n)/)) {
    for (let i = 0; i < line.length; i += LINE_LEN - 1) out.push(line.slice(i, i + LINE_LEN - 1));
  }
  return out;
}

/** sanityChecks() at `end remote`: mask values to their widths. */
function sanityCheck(d: Draft, fail: (m: string) => never): void {
  const r = d.remote;
  if (!r.name) fail('missing remote name');
  if ((r.flags & PROTOCOL_MASK) === Flag.RAW_CODES) return;
  r.preData &= genMask(r.preDataBits);
  r.postData &= genMask(r.postDataBits);
  if (!d.codesDefined) fail(`remote "${r.name}": no codes`);
  const mask = genMask(r.bits);
  for (const c of r.codes) c.codes = c.codes.map((v) => v & mask);
}

/** read_config's pass over every remote once the file parsed. */
function finish(d: Draft): LircRemote {
  const r = d.remote;
  const raw = (r.flags & PROTOCOL_MASK) === Flag.RAW_CODES;
  const allBits = r.preDataBits + r.bits + r.postDataBits;
  if (!raw && r.flags & Flag.REVERSE) {
    if (r.preDataBits > 0) r.preData = reverseBits(r.preData, r.preDataBits);
    if (r.postDataBits > 0) r.postData = reverseBits(r.postData, r.postDataBits);
    // LIRC reverses only the first code of a multi-code button.
    for (const c of r.codes) if (c.codes.length > 0) c.codes[0] = reverseBits(c.codes[0]!, r.bits);
  }
  if (r.flags & Flag.RC6 && r.rc6Mask === 0n && d.toggleBit > 0) r.rc6Mask = bit64(allBits - d.toggleBit);
  if (d.toggleBit > 0 && r.toggleBitMask === 0n) r.toggleBitMask = bit64(allBits - d.toggleBit);
  if (r.toggleBitMask > 0n && !raw) {
    // "start with state set to 0 for backwards compatibility"
    const first = r.codes[0]?.codes[0] ?? 0n;
    const state = first & r.toggleBitMask;
    r.toggleBitMaskState = state ? state ^ r.toggleBitMask : 0n;
  }
  return r;
}

/**
 * Parse a `lircd.conf` file. Returns its remotes in file order. Throws a
 * `FarmError('invalid_request')` whose message starts `<fileName>:<line>:`
 * for anything LIRC itself would refuse to load.
 */
export function parseLircConfig(text: string, fileName: string): LircRemote[] {
  return new ConfigParser(fileName).parse(text);
}

/**
 * The remotes in the order LIRC keeps them after loading (sort_by_bit_count):
 * non-raw before raw, fewer bits (raw: fewer buttons) first, file order among
 * equals; file order when any remote sets `manual_sort`. `irsimsend` looks
 * keys up in the first remote of this order only.
 */
export function lircOrder(remotes: readonly LircRemote[]): LircRemote[] {
  if (remotes.some((r) => r.manualSort)) return [...remotes];
  const size = (r: LircRemote) =>
    isRaw(r) ? [1, r.codes.length] : [0, r.preDataBits + r.bits + r.postDataBits];
  return [...remotes].sort((a, b) => {
    const [ra, sa] = size(a) as [number, number];
    const [rb, sb] = size(b) as [number, number];
    return ra !== rb ? ra - rb : sa - sb;
  });
}

/** True for remotes whose buttons are raw pulse/space lists. */
export const isRaw = (r: LircRemote): boolean => (r.flags & PROTOCOL_MASK) === Flag.RAW_CODES;
