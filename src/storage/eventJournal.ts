/**
 * The node's event journal: every event the hub publishes, as one JSON line,
 * in `<data_dir>/events/`, so a restart (a crash, SIGKILL, an upgrade) loses
 * none the portal or a client has not read yet. docs/events.md "Ids and
 * resuming" says what a client sees.
 *
 * On disk: segments `<12-digit number>.jsonl`, appended to in order; the
 * newest is the one written. Once it holds `keep` lines (events.buffer_size)
 * the next segment is started, and the older segments no longer needed to
 * keep `keep` events are deleted, whole. So the journal holds between `keep`
 * and about 2 x `keep` events, no file is ever rewritten, and a rotation is a
 * new file and an unlink: nothing to make atomic.
 *
 * Writes: `append` is synchronous (`writeSync` on a descriptor opened with
 * O_APPEND) and runs before any subscriber sees the event, so an event a
 * client or the portal received is in the kernel's page cache: a crash of the
 * daemon (SIGKILL, OOM, a bug) loses none. fsync is grouped: the first append
 * after a flush arms a timer (`fsyncMs`, 100 ms by default) and one
 * fdatasync then covers every event written since. A power loss or kernel
 * crash therefore loses at most the events of the last `fsyncMs` plus one
 * fdatasync; the events a subscriber got in that window may be gone from the
 * node (not from the portal that recorded them). A new segment's directory
 * entry is fsynced before the segments it replaces are unlinked. `close`
 * flushes everything.
 *
 * A failed write (disk full) is cut back off (ftruncate to the size before),
 * logged once until a write succeeds again, and counted (`failures`); the
 * event is still published, and lives in memory only.
 *
 * Load: the segments in order, through the results index's reader
 * (IndexFile.load), which cuts a torn last line (a crash mid-write) off the
 * file. A line that is not an event (bad JSON, another form) is skipped and
 * counted; so is an event of another node id (the data directory changed
 * node). The last `keep` events (and the one before) are handed to the hub.
 */
import { closeSync, constants, fdatasync, close as closeFd, fstatSync, ftruncateSync, openSync, writeSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { EVENT_TYPES, INTERNAL_EVENT_TYPES, isEventId, type EventJournal, type FarmEvent } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import { silentLogger } from '../logger.js';
import { syncDir } from './atomic.js';
import { IndexFile } from './results/index-file.js';

const datasyncP = promisify(fdatasync);
const closeP = promisify(closeFd);

const SEGMENT = /^(\d{12})\.jsonl$/;
const segmentName = (n: number) => `${String(n).padStart(12, '0')}.jsonl`;
const TYPES = new Set<string>([...EVENT_TYPES, ...INTERNAL_EVENT_TYPES]);

export const EVENTS_DIR = 'events';
export const DEFAULT_FSYNC_MS = 100;

export interface EventJournalOptions {
  /** `<data_dir>/events` */
  dir: string;
  /** Events kept at least (events.buffer_size). */
  keep: number;
  /** Events of another node id are skipped at load. */
  nodeId: string;
  /** The bound of grouped fsync: an appended event is on disk at most this long (plus one fdatasync) later. */
  fsyncMs?: number;
  logger?: Logger;
}

interface Segment {
  n: number;
  lines: number;
}

/** What `open` found. */
export interface JournalLoad {
  journal: FileEventJournal;
  /** The last `keep` events, oldest first, and the one before them when there is one. */
  history: FarmEvent[];
  /** Lines skipped: not an event, or of another node. */
  skipped: number;
  /** A torn last line was cut off (a crash in the middle of a write). */
  torn: number;
}

export class FileEventJournal implements EventJournal {
  private fd: number;
  /** Bytes in the current segment (where a failed write is cut back to). */
  private bytes: number;
  private readonly fsyncMs: number;
  private readonly log: Logger;
  /** Descriptors of finished segments, fdatasynced and closed by the next flush. */
  private readonly retired: number[] = [];
  /** Segments no longer needed, unlinked by the next flush (after the new one's entry is durable). */
  private readonly doomed: string[] = [];
  private dirty = false;
  private dirDirty = false;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  private failing = false;
  private failureCount = 0;
  private appendedCount = 0;
  private syncCount = 0;

  private constructor(
    private readonly o: EventJournalOptions,
    private readonly segments: Segment[],
    fd: number,
  ) {
    this.fd = fd;
    this.bytes = fstatSync(fd).size;
    this.fsyncMs = o.fsyncMs ?? DEFAULT_FSYNC_MS;
    this.log = o.logger ?? silentLogger;
  }

  /** Load the journal (creating its folder) and open the newest segment for appending. */
  static async open(o: EventJournalOptions): Promise<JournalLoad> {
    if (!Number.isInteger(o.keep) || o.keep < 1) throw new Error('keep must be a positive integer');
    await mkdir(o.dir, { recursive: true, mode: 0o700 });
    const names = (await readdir(o.dir)).filter((f) => SEGMENT.test(f)).sort();
    const segments: Segment[] = [];
    let events: FarmEvent[] = [];
    const seen = new Set<string>();
    let skipped = 0;
    let torn = 0;
    for (const name of names) {
      const seg: Segment = { n: Number(SEGMENT.exec(name)![1]), lines: 0 };
      const r = await new IndexFile(join(o.dir, name)).load((line) => {
        seg.lines++;
        const e = parseEvent(line);
        if (!e || e.data.node_id !== o.nodeId || seen.has(e.id)) {
          skipped++;
          return;
        }
        seen.add(e.id);
        events.push(e);
        // Bounded memory whatever the files hold: keep the last `keep` as we go.
        if (events.length > 2 * o.keep + 2) events = events.slice(-o.keep - 1);
      });
      if (r?.torn !== undefined) torn++;
      segments.push(seg);
    }
    events = events.slice(-o.keep - 1); // one more: the hub knows a resume after it missed nothing
    // Append to the newest segment unless it is full (or there is none).
    const last = segments.at(-1);
    if (!last || last.lines >= o.keep) segments.push({ n: (last?.n ?? 0) + 1, lines: 0 });
    const current = segments.at(-1)!;
    const fd = openSync(join(o.dir, segmentName(current.n)), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
    const journal = new FileEventJournal(o, segments, fd);
    if (!last || current !== last) journal.dirDirty = true;
    journal.dropUnneeded();
    await journal.flush();
    const log = o.logger ?? silentLogger;
    if (skipped || torn) log.warn({ skipped, torn }, 'event journal: skipped lines that are not events of this node, and cut torn last lines (a crash mid-write)');
    log.info({ events: events.length, segments: segments.length }, 'event journal loaded');
    return { journal, history: events, skipped, torn };
  }

  append(event: FarmEvent): void {
    if (this.closed) return;
    const buf = Buffer.from(JSON.stringify(event) + '\n');
    try {
      for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off, buf.length - off);
    } catch (e) {
      this.failureCount++;
      try {
        ftruncateSync(this.fd, this.bytes); // no half line in the middle of the file
      } catch {
        // the next load cuts a torn line anyway
      }
      if (!this.failing) this.log.error({ err: e, event: event.id }, 'event journal: cannot write; events are kept in memory only until a write succeeds');
      this.failing = true;
      return;
    }
    if (this.failing) this.log.warn({ failures: this.failureCount }, 'event journal: writing again');
    this.failing = false;
    this.bytes += buf.length;
    this.appendedCount++;
    this.dirty = true;
    const seg = this.segments.at(-1)!;
    if (++seg.lines >= this.o.keep) this.rotate();
    this.schedule();
  }

  /** Start the next segment; the full one is synced and closed by the next flush. */
  private rotate(): void {
    const n = this.segments.at(-1)!.n + 1;
    let fd: number;
    try {
      fd = openSync(join(this.o.dir, segmentName(n)), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    } catch (e) {
      // Keep appending to the full segment (the journal grows past its bound until a rotation succeeds).
      this.log.error({ err: e }, 'event journal: cannot start a new segment');
      return;
    }
    this.retired.push(this.fd);
    this.fd = fd;
    this.bytes = 0;
    this.segments.push({ n, lines: 0 });
    this.dirDirty = true;
    this.dropUnneeded();
  }

  /** Mark for deletion the oldest segments while the rest still hold `keep` lines. */
  private dropUnneeded(): void {
    let total = this.segments.reduce((s, g) => s + g.lines, 0);
    while (this.segments.length > 1 && total - this.segments[0]!.lines >= this.o.keep) {
      const g = this.segments.shift()!;
      total -= g.lines;
      this.doomed.push(join(this.o.dir, segmentName(g.n)));
    }
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.fsyncMs);
    this.timer.unref();
  }

  /** fdatasync what was written (and the folder, after a rotation); resolves when it is on disk. */
  flush(): Promise<void> {
    this.chain = this.chain.then(() =>
      this.sync().catch((e: unknown) => {
        this.failureCount++;
        this.log.error({ err: e }, 'event journal: fsync failed');
      }),
    );
    return this.chain;
  }

  private async sync(): Promise<void> {
    const retired = this.retired.splice(0);
    const doomed = this.doomed.splice(0);
    const dirty = this.dirty;
    const dirDirty = this.dirDirty;
    this.dirty = this.dirDirty = false;
    for (const fd of retired) {
      await datasyncP(fd);
      await closeP(fd);
    }
    if (dirty && !this.closed) {
      await datasyncP(this.fd);
      this.syncCount++;
    }
    if (dirDirty) await syncDir(this.o.dir);
    for (const f of doomed) await rm(f, { force: true });
  }

  /** Flush and close; appends after this are ignored. */
  async close(): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
    this.closed = true;
    closeSync(this.fd);
  }

  /** Events written since open. */
  get appended(): number {
    return this.appendedCount;
  }

  /** fdatasyncs of the segment written (each covers every event appended before it). */
  get syncs(): number {
    return this.syncCount;
  }

  /** Failed writes and fsyncs since open. */
  get failures(): number {
    return this.failureCount;
  }
}

/** A journal line as an event, or undefined when it is not one. */
function parseEvent(line: string): FarmEvent | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const e = v as Partial<FarmEvent>;
  if (typeof e.id !== 'string' || !isEventId(e.id) || typeof e.type !== 'string' || !TYPES.has(e.type) || typeof e.time !== 'string') return undefined;
  if (typeof e.data !== 'object' || e.data === null || typeof (e.data as { node_id?: unknown }).node_id !== 'string') return undefined;
  return e as FarmEvent;
}
