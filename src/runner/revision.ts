/**
 * What a client may send as a test-pack revision, and what paths inside the
 * test pack look like. A revision that passes `checkRevision` can only be
 * read by git as a ref name or a (short) SHA: never as an option, a range, a
 * reflog entry, a path (`rev:path`) or any other revision expression.
 */
import { invalid } from '../core/errors.js';

/** A full object id: SHA-1 (40 hex digits) or SHA-256 (64). */
export const FULL_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Why a revision is refused, or undefined when it is acceptable. Mirrors `git check-ref-format`. */
export function revisionProblem(rev: string): string | undefined {
  if (rev.length === 0) return 'is empty';
  if (rev.length > 1024) return 'is longer than 1024 characters';
  if (rev.startsWith('-')) return 'must not start with "-"';
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x20\x7f]/.test(rev)) return 'must not contain spaces or control characters';
  const bad = /[~^:?*[\\]/.exec(rev);
  if (bad) return `must not contain "${bad[0]}"`;
  if (rev.includes('..')) return 'must not contain ".."';
  if (rev.includes('@{')) return 'must not contain "@{"';
  if (rev === '@') return 'must not be "@"';
  if (rev.startsWith('/') || rev.endsWith('/') || rev.includes('//')) return 'has an empty path component';
  if (rev.endsWith('.')) return 'must not end with "."';
  for (const part of rev.split('/')) {
    if (part.startsWith('.')) return 'has a component starting with "."';
    if (part.endsWith('.lock')) return 'has a component ending with ".lock"';
  }
  return undefined;
}

/** Throws FarmError `invalid_request` unless the revision is a plain ref name or SHA. */
export function checkRevision(rev: string): string {
  const problem = revisionProblem(rev);
  if (problem) throw invalid(`test_pack_revision ${JSON.stringify(rev.slice(0, 100))} ${problem}`);
  return rev;
}

/** Throws FarmError `invalid_request` unless this is a full, lowercase commit id. */
export function checkSha(sha: string): string {
  if (!FULL_SHA.test(sha)) throw invalid(`not a full commit SHA: ${JSON.stringify(sha.slice(0, 100))}`);
  return sha;
}

/**
 * Throws FarmError `invalid_request` unless the path is relative, inside the
 * repository and safe to put on one line of `git cat-file --batch` input.
 */
export function checkRepoPath(p: string): string {
  // eslint-disable-next-line no-control-regex
  const ok = p.length > 0 && p.length <= 4096 && !/[\x00-\x1f]/.test(p) && !p.startsWith('/') && !p.split('/').some((s) => s === '' || s === '.' || s === '..');
  if (!ok) throw invalid(`not a path inside the test pack: ${JSON.stringify(p.slice(0, 100))}`);
  return p;
}
