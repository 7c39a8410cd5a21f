/**
 * A node's audit trail (docs/auth.md, "Audit trail"): `<data_dir>/audit/<UTC day>.jsonl`, one entry a line,
 * appended only. Two kinds of writers share the folder: the daemon (this class, open for its whole life) and
 * the CLI (`appendAuditEntry`, one entry a run, in `<UTC day>.cli.jsonl`, so a CLI run as root makes no file the
 * daemon cannot append to). Every entry is one `write` on a descriptor opened with O_APPEND, so two CLI runs
 * at once never mix their lines.
 *
 * Durability, as the event journal (src/storage/eventJournal.ts): the daemon's write is synchronous, before
 * the answer leaves (a crash of the daemon loses no entry of an answered request); fdatasync is grouped
 * (`fsyncMs`, 100 ms), so a power loss loses at most that much. The CLI fsyncs its entry before it exits.
 *
 * A crash in the middle of a write leaves a last line without its newline: whoever opens the day's file to
 * append first cuts it off (back to the last newline), so no entry is glued to a torn one; a reader skips a
 * line that is not an entry. Earlier entries are never touched.
 *
 * Retention: files of days older than `keepDays` are deleted at open and every hour after (`now` injectable).
 * Query: the day files newest first, each read whole (a day is a few MB at most), filtered, newest first.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fdatasync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readSync, writeSync } from 'node:fs';
import { mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { entryMatches, isAuditAction, type AuditEntry, type AuditLog, type AuditPage, type AuditQuery, type NewAuditEntry } from '../core/audit.js';
import type { Logger } from '../core/ports.js';
import { silentLogger } from '../logger.js';

const datasyncP = promisify(fdatasync);

export const AUDIT_DIR = 'audit';
export const DEFAULT_AUDIT_KEEP_DAYS = 90;
/** `<day>.jsonl`: the daemon's; `<day>.cli.jsonl`: the CLI's (its own file: a CLI run as root makes no file the daemon cannot append to). */
const DAY_FILE = /^(\d{4}-\d{2}-\d{2})(\.cli)?\.jsonl$/;
/** Node entry ids: the time in ms (13 digits), then 8 random hex digits; they sort as text. */
export const NODE_AUDIT_ID = /^\d{13}-[0-9a-f]{8}$/;
const DAY_MS = 86_400_000;
const SWEEP_MS = 3_600_000;

export const auditDir = (dataDir: string): string => join(dataDir, AUDIT_DIR);
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** A new entry id for time `ms`. */
export const newAuditId = (ms: number): string => `${String(ms).padStart(13, '0')}-${randomBytes(4).toString('hex')}`;

/** Open `dir/<day>.jsonl` for appending, cutting a torn last line (a crash mid-write) off first. */
function openDay(dir: string, name: string, mode = 0o600): number {
  const fd = openSync(join(dir, name), constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, mode);
  try {
    const size = fstatSync(fd).size;
    if (size > 0) {
      const tail = Buffer.alloc(Math.min(size, 64 * 1024));
      readSync(fd, tail, 0, tail.length, size - tail.length);
      if (tail[tail.length - 1] !== 0x0a) {
        const nl = tail.lastIndexOf(0x0a);
        // No newline in the last 64 KiB: no entry is that long, so all of it is torn.
        ftruncateSync(fd, nl < 0 ? Math.max(0, size - tail.length) : size - tail.length + nl + 1);
      }
    }
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  return fd;
}

/** The line of an entry: the fields in a fixed order. */
const lineOf = (e: AuditEntry): Buffer => Buffer.from(JSON.stringify(e) + '\n');

/** The CLI's way in: append one entry to the day's file and fsync it (synchronous; throws on failure). */
export function appendAuditEntry(dataDir: string, entry: NewAuditEntry): AuditEntry {
  const dir = auditDir(dataDir);
  const at = Date.parse(entry.at);
  const full: AuditEntry = { id: newAuditId(at), ...entry };
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // 0644: a daemon running as another user than the CLI still reads it (an entry holds no secret).
  const fd = openDay(dir, `${dayOf(at)}.cli.jsonl`, 0o644);
  try {
    const buf = lineOf(full);
    writeSync(fd, buf, 0, buf.length);
    // One write: a short one (disk full) leaves a torn line, cut by the next writer.
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return full;
}

export interface FileAuditLogOptions {
  dataDir: string;
  /** Days of entries kept (audit.keep_days). */
  keepDays: number;
  fsyncMs?: number;
  logger?: Logger;
  /** The clock, ms since the epoch (tests). */
  now?: () => number;
}

export class FileAuditLog implements AuditLog {
  readonly dir: string;
  private fd: number | undefined;
  private day: string | undefined;
  private dirty = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly sweeper: NodeJS.Timeout;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  private failing = false;
  private readonly now: () => number;
  private readonly log: Logger;
  /** Failed writes since open (each logged while failing starts). */
  failures = 0;

  private constructor(private readonly o: FileAuditLogOptions) {
    this.dir = auditDir(o.dataDir);
    this.now = o.now ?? Date.now;
    this.log = o.logger ?? silentLogger;
    this.sweeper = setInterval(() => void this.sweep().catch((e: unknown) => this.log.error({ err: e }, 'audit trail: retention failed')), SWEEP_MS);
    this.sweeper.unref();
  }

  /** Make the folder, delete what retention says, and open today's file. */
  static async open(o: FileAuditLogOptions): Promise<FileAuditLog> {
    if (!Number.isInteger(o.keepDays) || o.keepDays < 1) throw new Error('keepDays must be a positive integer');
    await mkdir(auditDir(o.dataDir), { recursive: true, mode: 0o700 });
    const log = new FileAuditLog(o);
    await log.sweep();
    log.fdFor(log.now());
    return log;
  }

  /** Delete the files of days before the kept ones; returns their names. */
  async sweep(): Promise<string[]> {
    const oldest = dayOf(this.now() - this.o.keepDays * DAY_MS);
    const gone: string[] = [];
    for (const f of await readdir(this.dir)) {
      const m = DAY_FILE.exec(f);
      if (m && m[1]! < oldest) {
        await rm(join(this.dir, f), { force: true });
        gone.push(f);
      }
    }
    if (gone.length) this.log.info({ files: gone.length, keep_days: this.o.keepDays }, 'audit trail: deleted the files of days past audit.keep_days');
    return gone;
  }

  private fdFor(ms: number): number {
    const day = dayOf(ms);
    if (this.fd !== undefined && this.day === day) return this.fd;
    const fd = openDay(this.dir, `${day}.jsonl`);
    if (this.fd !== undefined) {
      const old = this.fd;
      this.chain = this.chain.then(() => datasyncP(old).catch(() => undefined)).then(() => closeSync(old));
    }
    this.fd = fd;
    this.day = day;
    return fd;
  }

  record(entry: NewAuditEntry): void {
    if (this.closed) return;
    const at = Date.parse(entry.at);
    const full: AuditEntry = { id: newAuditId(at), ...entry };
    const buf = lineOf(full);
    try {
      const fd = this.fdFor(at);
      const before = fstatSync(fd).size;
      try {
        for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
      } catch (e) {
        ftruncateSync(fd, before); // no half line in the middle of the file
        throw e;
      }
    } catch (e) {
      this.failures++;
      if (!this.failing) this.log.error({ err: e, action: entry.action }, 'audit trail: cannot write an entry (logged here instead)');
      this.log.warn({ audit: full }, 'audit entry not written');
      this.failing = true;
      return;
    }
    this.failing = false;
    this.dirty = true;
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.flush();
      }, this.o.fsyncMs ?? 100);
      this.timer.unref();
    }
  }

  /** fdatasync what was written; resolves when it is on disk. */
  flush(): Promise<void> {
    this.chain = this.chain.then(async () => {
      if (!this.dirty || this.fd === undefined) return;
      this.dirty = false;
      await datasyncP(this.fd).catch((e: unknown) => {
        this.failures++;
        this.log.error({ err: e }, 'audit trail: fsync failed');
      });
    });
    return this.chain;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.timer);
    clearInterval(this.sweeper);
    await this.flush();
    this.closed = true;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  query(q: AuditQuery): Promise<AuditPage> {
    return queryAuditDir(this.dir, q);
  }

  isCursor(before: string): boolean {
    return NODE_AUDIT_ID.test(before);
  }
}

/** The entries of the folder that pass `q`, newest first (the daemon's and the CLI's alike). */
export async function queryAuditDir(dir: string, q: AuditQuery): Promise<AuditPage> {
  let days: string[];
  try {
    days = [...new Set((await readdir(dir)).flatMap((f) => DAY_FILE.exec(f)?.[1] ?? []))].sort().reverse();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], next_before: null };
    throw e;
  }
  const beforeMs = q.before ? Number(q.before.slice(0, 13)) : undefined;
  const last = [q.until, beforeMs].filter((x): x is number => x !== undefined);
  const lastDay = last.length ? dayOf(Math.min(...last)) : undefined;
  const firstDay = q.since !== undefined ? dayOf(q.since) : undefined;
  const out: AuditEntry[] = [];
  for (const day of days) {
    if (lastDay !== undefined && day > lastDay) continue;
    if (firstDay !== undefined && day < firstDay) break;
    let text = '';
    for (const name of [`${day}.jsonl`, `${day}.cli.jsonl`]) {
      try {
        text += (await readFile(join(dir, name), 'utf8')) + '\n';
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e; // absent, or deleted by retention meanwhile
      }
    }
    const found: AuditEntry[] = [];
    for (const line of text.split('\n')) {
      const e = parseEntry(line);
      if (e && (q.before === undefined || e.id < q.before) && entryMatches(q, e)) found.push(e);
    }
    found.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    out.push(...found);
    if (out.length > q.limit) break;
  }
  const entries = out.slice(0, q.limit);
  return { entries, next_before: out.length > q.limit ? entries.at(-1)!.id : null };
}

function parseEntry(line: string): AuditEntry | undefined {
  if (!line) return undefined;
  try {
    const v = JSON.parse(line) as Partial<AuditEntry>;
    if (typeof v !== 'object' || v === null || typeof v.id !== 'string' || !NODE_AUDIT_ID.test(v.id) || !isAuditAction(v.action) || typeof v.at !== 'string' || typeof v.who !== 'string') return undefined;
    return v as AuditEntry;
  } catch {
    return undefined; // a torn line, or not an entry
  }
}
