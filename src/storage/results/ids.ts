/**
 * Strict checks of result ids before any of them becomes a path. A result_id
 * `/<node>/<hex>/<n>/<YYYY-MM-DD>_<hh.mm.ss>` maps to the folder
 * `<hex>/<n>/<stamp>` under the results directory (one node per data dir, so
 * the node id is not part of the path). Every segment must match its regex in
 * full, so nothing a request sends can name `..`, an absolute path, a NUL or
 * a separator.
 */

const NODE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const HEX = /^[0-9a-f]{1,16}$/;
const NUMBER = /^[1-9][0-9]{0,15}$/;
const STAMP = /^(\d{4})-(\d{2})-(\d{2})_(\d{2})\.(\d{2})\.(\d{2})$/;

/** The parts of a well-formed result id. */
export interface ResultIdParts {
  /** `/<node>/<hex>/<n>` */
  jobUid: string;
  /** `<hex>/<n>/<stamp>`: the folder relative to the results directory. */
  relDir: string;
  /** The run's start, whole seconds since the epoch (UTC). */
  seconds: number;
}

/** Parse a result id (leading slash optional); undefined unless every segment is well formed. */
export function parseResultId(id: unknown): ResultIdParts | undefined {
  if (typeof id !== 'string' || id.length > 200) return undefined;
  const parts = id.replace(/^\//, '').split('/');
  if (parts.length !== 4) return undefined;
  const [node, hex, num, stamp] = parts as [string, string, string, string];
  if (!NODE.test(node) || !HEX.test(hex) || !NUMBER.test(num)) return undefined;
  const seconds = stampSeconds(stamp);
  if (seconds === undefined) return undefined;
  return { jobUid: `/${node}/${hex}/${num}`, relDir: `${hex}/${num}/${stamp}`, seconds };
}

/** `YYYY-MM-DD_hh.mm.ss` (UTC) as seconds since the epoch; undefined when not a real time. */
export function stampSeconds(stamp: string): number | undefined {
  const m = STAMP.exec(stamp);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  const back = new Date(ms);
  // Date.UTC rolls 2026-02-30 over into March: a round trip catches it.
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) {
    return undefined;
  }
  return ms / 1000;
}

/** The stamp of a time in seconds, inverse of {@link stampSeconds}. */
export function secondsStamp(seconds: number): string {
  const iso = new Date(seconds * 1000).toISOString();
  return `${iso.slice(0, 10)}_${iso.slice(11, 19).replaceAll(':', '.')}`;
}

/** Folder names at each level below the results directory, for the scan that rebuilds the index. */
export const isHexDir = (name: string): boolean => HEX.test(name);
export const isNumberDir = (name: string): boolean => NUMBER.test(name);
export const isStampDir = (name: string): boolean => stampSeconds(name) !== undefined;
