/**
 * The results index's snapshot, `index.snapshot`: the columns of the
 * in-memory index (columnar-index.ts) as they are, with what they cover of
 * `index.jsonl`, so a start loads it and reads only the lines after it.
 * `index.jsonl` stays the truth: a snapshot that fails any check is ignored.
 *
 * Layout (little-endian):
 *   0   8 bytes  magic "FHRIDX\n\0"
 *   8   u32      format version (SNAPSHOT_VERSION)
 *   12  u32      length of the header JSON
 *   16  32 bytes sha256 of every byte from 48 to the end
 *   48           header JSON, padded with spaces to a multiple of 8
 *                then the columns, each padded to a multiple of 8:
 *                start, end, duration, stamp (Float64 x n), outcome,
 *                infrastructure (Uint8 x n), the string columns (Uint32 x n
 *                each, in STRING_COLUMNS order)
 * The header: n, the string table, what it covers of index.jsonl (its
 * length, inode, and sha256 of its first and last 4 KiB up to that length),
 * the dead-line count and the deleted ids (deleted-ids.ts's file form).
 */
import { createHash } from 'node:crypto';
import { STRING_COLUMNS, NONE, NULLABLE, type ColumnData } from './columnar-index.js';
import { INFRASTRUCTURE_KINDS } from '../../core/infrastructure.js';

export const SNAPSHOT_VERSION = 1;
const MAGIC = Buffer.from('FHRIDX\n\0', 'latin1');
const FIXED = 48;

/** What a snapshot covers of index.jsonl. */
export interface Coverage {
  /** Bytes of index.jsonl the snapshot holds (whole lines). */
  size: number;
  ino: number;
  /** sha256 (hex) of the first and the last min(4096, size) bytes below `size`. */
  head: string;
  tail: string;
}

export interface SnapshotHeader {
  n: number;
  strs: string[];
  jsonl: Coverage;
  deadLines: number;
  deleted: string;
}

const pad8 = (n: number): number => (8 - (n % 8)) % 8;
/** A time `new Date(ms).toISOString()` can write (a record's answer is made from it). */
const isTime = (ms: number): boolean => Number.isFinite(ms) && Math.abs(ms) <= 8.64e15;

/** The snapshot's bytes, in chunks (the columns are not copied). */
export function encodeSnapshot(c: ColumnData, meta: Omit<SnapshotHeader, 'n' | 'strs'>): Buffer[] {
  const header: SnapshotHeader = { n: c.n, strs: c.strs, ...meta };
  let json = Buffer.from(JSON.stringify(header), 'utf8');
  const headerLen = json.length;
  json = Buffer.concat([json, Buffer.alloc(pad8(json.length), 0x20)]);
  const body: Buffer[] = [json];
  const push = (a: Float64Array | Uint8Array | Uint32Array): void => {
    body.push(Buffer.from(a.buffer, a.byteOffset, a.byteLength));
    const p = pad8(a.byteLength);
    if (p) body.push(Buffer.alloc(p));
  };
  for (const a of [c.start, c.end, c.dur, c.stamp, c.res, c.infra, ...c.cols]) push(a);
  const fixed = Buffer.alloc(FIXED);
  MAGIC.copy(fixed, 0);
  fixed.writeUInt32LE(SNAPSHOT_VERSION, 8);
  fixed.writeUInt32LE(headerLen, 12);
  const h = createHash('sha256');
  for (const b of body) h.update(b);
  h.digest().copy(fixed, 16);
  return [fixed, ...body];
}

/** The columns and header of a snapshot file's bytes; throws (with the reason) when it is not a whole, valid one. */
export function decodeSnapshot(buf: Buffer): { columns: ColumnData; header: SnapshotHeader } {
  if (buf.length < FIXED || !buf.subarray(0, 8).equals(MAGIC)) throw new Error('not a snapshot (no magic)');
  const version = buf.readUInt32LE(8);
  if (version !== SNAPSHOT_VERSION) throw new Error(`format version ${version}, this daemon reads ${SNAPSHOT_VERSION}`);
  const digest = createHash('sha256').update(buf.subarray(FIXED)).digest();
  if (!digest.equals(buf.subarray(16, 48))) throw new Error('checksum mismatch (torn or damaged)');
  const headerLen = buf.readUInt32LE(12);
  const header = JSON.parse(buf.toString('utf8', FIXED, FIXED + headerLen)) as SnapshotHeader;
  const { n, strs } = header;
  if (!Number.isInteger(n) || n < 0 || !Array.isArray(strs) || typeof header.deleted !== 'string' || typeof header.jsonl?.size !== 'number') {
    throw new Error('bad header');
  }
  // Typed arrays over the file's bytes need 8-byte alignment of the whole buffer.
  const bytes = buf.byteOffset % 8 === 0 ? buf : Buffer.from(buf);
  let off = FIXED + headerLen + pad8(headerLen);
  const take = <T>(make: (ab: ArrayBufferLike, at: number, len: number) => T, width: number): T => {
    const bytesLen = width * n;
    if (off + bytesLen > bytes.length) throw new Error('shorter than its header says');
    const v = make(bytes.buffer, bytes.byteOffset + off, n);
    off += bytesLen + pad8(bytesLen);
    return v;
  };
  const f64 = () => take((ab, at, len) => new Float64Array(ab, at, len), 8);
  const u8 = () => take((ab, at, len) => new Uint8Array(ab, at, len), 1);
  const start = f64();
  const end = f64();
  const dur = f64();
  const stamp = f64();
  const res = u8();
  const infra = u8();
  const cols = STRING_COLUMNS.map(() => take((ab, at, len) => new Uint32Array(ab, at, len), 4));
  if (off !== bytes.length) throw new Error('longer than its header says');
  // The checksum rules out damage; these rule out a snapshot this code would misread.
  const ns = strs.length;
  for (let i = 0; i < n; i++) {
    if (
      res[i]! > 2 || infra[i]! > 1 + INFRASTRUCTURE_KINDS.length || !Number.isFinite(dur[i]) ||
      !isTime(start[i]!) || !isTime(end[i]!) || !Number.isInteger(stamp[i]) || !isTime(stamp[i]! * 1000) ||
      (i > 0 && start[i]! < start[i - 1]!)
    ) {
      throw new Error(`row ${i} is not a valid record`);
    }
  }
  cols.forEach((col, c) => {
    const nullable = NULLABLE.has(c);
    for (let i = 0; i < n; i++) {
      const k = col[i]!;
      if (k >= ns && !(nullable && k === NONE)) throw new Error(`row ${i}: string index out of the table`);
    }
  });
  for (const x of strs) if (typeof x !== 'string') throw new Error('the string table holds a value that is not a string');
  if (!Number.isInteger(header.deadLines) || header.deadLines < 0) throw new Error('bad dead-line count');
  // Tag sets are made from their JSON when a record is answered: each must be an object of strings.
  const tagCol = cols[STRING_COLUMNS.indexOf('tags')]!;
  const seen = new Set<number>();
  for (let i = 0; i < n; i++) {
    const k = tagCol[i]!;
    if (seen.has(k)) continue;
    seen.add(k);
    let t: unknown;
    try {
      t = JSON.parse(strs[k]!);
    } catch {
      t = undefined;
    }
    if (typeof t !== 'object' || t === null || Array.isArray(t) || !Object.values(t).every((v) => typeof v === 'string')) {
      throw new Error(`row ${i}: its tags are not an object of strings`);
    }
  }
  return { columns: { n, strs, start, end, dur, stamp, res, infra, cols }, header };
}
