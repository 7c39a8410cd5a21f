/**
 * Identifiers (DESIGN.md "Identifiers"):
 *   job_uid   = /<node_id>/<hex>/<number>
 *   result_id = <job_uid>/<YYYY-MM-DD>_<hh.mm.ss>   (UTC)
 * In URLs they lose the leading slash and span several path segments.
 */

const NODE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const HEX = /^[0-9a-f]{4}$/;
const NUMBER = /^[1-9][0-9]{0,15}$/;
const STAMP = /^\d{4}-\d{2}-\d{2}_\d{2}\.\d{2}\.\d{2}$/;

export interface JobUidParts {
  nodeId: string;
  hex: string;
  number: number;
}

export const formatJobUid = (p: JobUidParts): string => `/${p.nodeId}/${p.hex}/${p.number}`;

/** Parse a job_uid (leading slash optional); undefined when it is not one. */
export function parseJobUid(uid: string): JobUidParts | undefined {
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

/** Parse a result_id (leading slash optional) into its job_uid and stamp. */
export function parseResultId(id: string): { job: JobUidParts; jobUid: string; stamp: string } | undefined {
  const parts = id.replace(/^\//, '').split('/');
  if (parts.length !== 4) return undefined;
  const stamp = parts[3]!;
  const job = parseJobUid(parts.slice(0, 3).join('/'));
  if (!job || !STAMP.test(stamp)) return undefined;
  return { job, jobUid: formatJobUid(job), stamp };
}
