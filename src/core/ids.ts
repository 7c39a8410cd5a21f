/**
 * Identifiers, parsed and made here and nowhere else:
 *   job_uid        = /<node_id>/<hex>/<number>
 *   result_id      = <job_uid>/<YYYY-MM-DD>_<hh.mm.ss>   (UTC)
 *   reservation_id = a positive integer
 * In URLs they lose the leading slash and span several path segments. A
 * result's folder is `<hex>/<number>/<stamp>` under the results directory (one
 * node per data dir, so the node id is not part of the path). Every segment
 * must match its regex in full, so nothing a request sends can name `..`, an
 * absolute path, a NUL or a separator.
 */

const NODE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
/** The installation's 4 hex digits (storage/state.ts makes them). */
const HEX = /^[0-9a-f]{4}$/;
const NUMBER = /^[1-9][0-9]{0,15}$/;
const STAMP = /^(\d{4})-(\d{2})-(\d{2})_(\d{2})\.(\d{2})\.(\d{2})$/;
/** Far longer than any real id; a longer string is not parsed at all. */
const MAX_ID_LENGTH = 200;

export interface JobUidParts {
  nodeId: string;
  hex: string;
  number: number;
}

/** The parts of a well-formed result id. */
export interface ResultIdParts {
  job: JobUidParts;
  /** `/<node>/<hex>/<n>` */
  jobUid: string;
  /** `YYYY-MM-DD_hh.mm.ss` */
  stamp: string;
  /** `<hex>/<n>/<stamp>`: the folder relative to the results directory. */
  relDir: string;
  /** The run's start, whole seconds since the epoch (UTC). */
  seconds: number;
}

export const formatJobUid = (p: JobUidParts): string => `/${p.nodeId}/${p.hex}/${p.number}`;

/** Parse a job_uid (leading slash optional); undefined when it is not one. */
export function parseJobUid(uid: unknown): JobUidParts | undefined {
  if (typeof uid !== 'string' || uid.length > MAX_ID_LENGTH) return undefined;
  const parts = uid.replace(/^\//, '').split('/');
  if (parts.length !== 3) return undefined;
  const [nodeId, hex, num] = parts as [string, string, string];
  if (!NODE.test(nodeId) || !HEX.test(hex) || !NUMBER.test(num)) return undefined;
  return { nodeId, hex, number: Number(num) };
}

/** `YYYY-MM-DD_hh.mm.ss` of a time, in UTC. */
export function runStamp(at: Date): string {
  const iso = at.toISOString(); // 2026-11-23T09:19:15.123Z
  return `${iso.slice(0, 10)}_${iso.slice(11, 19).replaceAll(':', '.')}`;
}

export const formatResultId = (jobUid: string, at: Date): string => `${jobUid}/${runStamp(at)}`;

/** Parse a result_id (leading slash optional); undefined unless every segment is well formed. */
export function parseResultId(id: unknown): ResultIdParts | undefined {
  if (typeof id !== 'string' || id.length > MAX_ID_LENGTH) return undefined;
  const parts = id.replace(/^\//, '').split('/');
  if (parts.length !== 4) return undefined;
  const stamp = parts[3]!;
  const job = parseJobUid(parts.slice(0, 3).join('/'));
  const seconds = stampSeconds(stamp);
  if (!job || seconds === undefined) return undefined;
  return { job, jobUid: formatJobUid(job), stamp, relDir: `${job.hex}/${job.number}/${stamp}`, seconds };
}

/** The job part of the last id {@link isCanonicalResultId} accepted, and the last date of a stamp it accepted. */
const lastCanonical = { job: '', date: '' };
const TIME = /^_([01]\d|2[0-3])\.([0-5]\d)\.([0-5]\d)$/;

/**
 * Whether `id` is a result id in the form the daemon writes it (leading
 * slash, every segment well formed: `formatJobUid(parseResultId(id).job)/stamp`
 * gives it back). Checks what `parseResultId` does, but remembers the last job
 * and date it accepted: loading the results index asks this 100,000 times,
 * mostly for runs of one job on one day in a row.
 */
export function isCanonicalResultId(id: string): boolean {
  if (id.length > MAX_ID_LENGTH || id.charCodeAt(0) !== 0x2f) return false;
  const cut = id.lastIndexOf('/');
  if (cut <= 0) return false;
  const job = id.slice(0, cut);
  if (job !== lastCanonical.job) {
    const p = parseJobUid(job);
    if (!p || formatJobUid(p) !== job) return false;
    lastCanonical.job = job;
  }
  const stamp = id.slice(cut + 1);
  const date = stamp.slice(0, 10);
  if (date !== lastCanonical.date || stamp.length !== 19) {
    if (stampSeconds(stamp) === undefined) return false;
    lastCanonical.date = date;
    return true;
  }
  return TIME.test(stamp.slice(10));
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
export const secondsStamp = (seconds: number): string => runStamp(new Date(seconds * 1000));

/** Folder names at each level below the results directory, for the scans that rebuild the index and recover. */
export const isHexDir = (name: string): boolean => HEX.test(name);
export const isNumberDir = (name: string): boolean => NUMBER.test(name);
export const isStampDir = (name: string): boolean => stampSeconds(name) !== undefined;
