/**
 * Which result ids retention deleted, kept so they answer 410 forever (spec:
 * "410 result deleted"). Results grow without bound (a soak job can add one a
 * second), so ids are not kept one by one: retention deletes the oldest runs
 * first and a job's runs follow each other in time, so the deleted runs of a
 * job are always its earliest ones. Per job the set keeps the first and last
 * deleted start second - a few dozen bytes a job, however many runs it had.
 *
 * The price: an id that never existed but names a job and a time inside that
 * job's deleted span answers 'deleted' (410) instead of unknown (404). The
 * API hands out only real ids, so only a made-up id meets this. A live result
 * always wins: callers look in the index first.
 *
 * File form (`deleted.jsonl`), one job a line:
 * `{"job":"/node/ab12/7","from":"2026-11-20_10.00.00","to":"2026-11-20_18.42.07"}`.
 */
import { secondsStamp, stampSeconds } from '../../core/ids.js';

interface Span { from: number; to: number }

export class DeletedIds {
  private readonly byJob = new Map<string, Span>();

  /** Jobs with deleted runs. */
  get jobs(): number {
    return this.byJob.size;
  }

  has(jobUid: string, seconds: number): boolean {
    const s = this.byJob.get(jobUid);
    return s !== undefined && seconds >= s.from && seconds <= s.to;
  }

  add(jobUid: string, seconds: number): void {
    const s = this.byJob.get(jobUid);
    if (!s) this.byJob.set(jobUid, { from: seconds, to: seconds });
    else if (seconds < s.from) s.from = seconds;
    else if (seconds > s.to) s.to = seconds;
  }

  /** The whole set in the file's format. */
  serialize(): string {
    let out = '';
    for (const [job, s] of this.byJob) {
      out += JSON.stringify({ job, from: secondsStamp(s.from), to: secondsStamp(s.to) }) + '\n';
    }
    return out;
  }

  /** Merge one line of the file; false when the line is not one. */
  addLine(line: string): boolean {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return false;
    }
    const { job, from, to } = (parsed ?? {}) as { job?: unknown; from?: unknown; to?: unknown };
    if (typeof job !== 'string' || typeof from !== 'string' || typeof to !== 'string') return false;
    const a = stampSeconds(from);
    const b = stampSeconds(to);
    if (a === undefined || b === undefined || a > b) return false;
    this.add(job, a);
    this.add(job, b);
    return true;
  }
}
