/**
 * The farm's audit trail in PostgreSQL (table `audit`, migration 9; docs/auth.md, "Audit trail").
 *
 * `record` never waits: entries go to a queue in memory that one writer empties into the table, many rows to an
 * INSERT, at once. While the database is away the queue waits (at most MAX_QUEUED entries; past that the oldest
 * are dropped, counted and logged: the portal keeps serving) and the writer tries again every RETRY_MS. A query
 * first waits for the entries recorded before it (read your writes). `close` writes what is queued.
 *
 * Retention: rows older than `keepDays` are deleted at start and every hour.
 */
import { userInfo } from 'node:os';
import type pg from 'pg';
import { actionMatches, type AuditAction, type AuditEntry, type AuditLog, type AuditPage, type AuditQuery, type AuditVia, type NewAuditEntry } from '../core/audit.js';
import type { Logger } from '../core/ports.js';
import { silentLogger } from '../logger.js';

const MAX_QUEUED = 10_000;
const BATCH = 500;
const RETRY_MS = 2_000;
const SWEEP_MS = 3_600_000;
/** Farm entry ids: the row's bigserial. */
export const FARM_AUDIT_ID = /^[1-9][0-9]{0,17}$/;

interface Row {
  id: string;
  at: Date;
  who: string;
  via: string;
  token_id: string | null;
  from_addr: string | null;
  action: string;
  node_id: string | null;
  target: string | null;
  detail: Record<string, unknown>;
  outcome: number;
}

const COLUMNS = ['at', 'who', 'via', 'token_id', 'from_addr', 'action', 'node_id', 'target', 'detail', 'outcome'] as const;
const valuesOf = (e: NewAuditEntry): unknown[] => [e.at, e.who, e.via, e.token_id, e.from, e.action, e.node, e.target, JSON.stringify(e.detail), e.outcome];

/** Insert entries at once (the CLI's way in, and the writer's). */
export async function insertAuditEntries(pool: Pick<pg.Pool, 'query'>, entries: NewAuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const params: unknown[] = [];
  const rows = entries.map((e) => `(${valuesOf(e).map((v) => (params.push(v), `$${params.length}`)).join(', ')})`);
  await pool.query(`INSERT INTO audit (${COLUMNS.join(', ')}) VALUES ${rows.join(', ')}`, params);
}

/** The entry of a `farmhand farm` command: who is `cli`, the operating system's user in `detail.os_user`. */
export function commandEntry(action: AuditAction, target: string, detail: Record<string, unknown>): NewAuditEntry {
  let osUser: string | null = null;
  try {
    osUser = userInfo().username;
  } catch {
    // no passwd entry for this uid
  }
  const node = action.startsWith('node.') ? target : null;
  return { at: new Date().toISOString(), who: 'cli', via: 'cli', token_id: null, from: null, action, node, target, detail: { ...detail, os_user: osUser }, outcome: 0 };
}

export interface PgAuditLogOptions {
  pool: pg.Pool;
  keepDays: number;
  logger?: Logger;
}

export class PgAuditLog implements AuditLog {
  private queue: NewAuditEntry[] = [];
  private writing: Promise<void> | undefined;
  private retry: NodeJS.Timeout | undefined;
  private readonly sweeper: NodeJS.Timeout;
  private readonly log: Logger;
  private closed = false;
  /** Entries dropped because the queue was full while the database was away. */
  dropped = 0;

  constructor(private readonly o: PgAuditLogOptions) {
    this.log = o.logger ?? silentLogger;
    this.sweeper = setInterval(() => void this.sweep().catch((e: unknown) => this.log.error({ err: e }, 'audit trail: retention failed')), SWEEP_MS);
    this.sweeper.unref();
    void this.sweep().catch((e: unknown) => this.log.warn({ err: e }, 'audit trail: retention at start failed (tried again within the hour)'));
  }

  record(entry: NewAuditEntry): void {
    if (this.closed) return;
    this.queue.push(entry);
    if (this.queue.length > MAX_QUEUED) {
      this.dropped += this.queue.length - MAX_QUEUED;
      this.queue.splice(0, this.queue.length - MAX_QUEUED);
      this.log.error({ dropped: this.dropped }, 'audit trail: the database has been away too long; the oldest queued entries were dropped');
    }
    void this.flush().catch(() => undefined);
  }

  /** Write what is queued; resolves when it is in the table (rejects while the database is away). */
  flush(): Promise<void> {
    return (this.writing ??= this.write().finally(() => (this.writing = undefined)));
  }

  private async write(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, BATCH);
      try {
        await insertAuditEntries(this.o.pool, batch);
      } catch (e) {
        this.log.warn({ err: e, queued: this.queue.length }, 'audit trail: cannot write to the database; trying again');
        if (!this.retry && !this.closed) {
          this.retry = setTimeout(() => {
            this.retry = undefined;
            void this.flush().catch(() => undefined);
          }, RETRY_MS);
          this.retry.unref();
        }
        throw e;
      }
      this.queue.splice(0, batch.length);
    }
  }

  /** Delete rows older than keepDays; returns how many. */
  async sweep(): Promise<number> {
    const r = await this.o.pool.query(`DELETE FROM audit WHERE at < now() - make_interval(days => $1)`, [this.o.keepDays]);
    if (r.rowCount) this.log.info({ rows: r.rowCount, keep_days: this.o.keepDays }, 'audit trail: deleted entries past audit.keep_days');
    return r.rowCount ?? 0;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    clearTimeout(this.retry);
    await this.flush().catch((e: unknown) => this.log.error({ err: e, lost: this.queue.length }, 'audit trail: entries not written at stop'));
    this.closed = true;
  }

  isCursor(before: string): boolean {
    return FARM_AUDIT_ID.test(before);
  }

  async query(q: AuditQuery): Promise<AuditPage> {
    await this.flush();
    const where: string[] = [];
    const params: unknown[] = [];
    const p = (v: unknown) => (params.push(v), `$${params.length}`);
    if (q.user !== undefined) where.push(`who = ${p(q.user)}`);
    if (q.action !== undefined) where.push(`(action = ${p(q.action)} OR action LIKE ${p(`${q.action}.%`)})`);
    if (q.node !== undefined) where.push(`node_id = ${p(q.node)}`);
    if (q.since !== undefined) where.push(`at >= ${p(new Date(q.since))}`);
    if (q.until !== undefined) where.push(`at <= ${p(new Date(q.until))}`);
    if (q.before !== undefined) where.push(`id < ${p(q.before)}`);
    const { rows } = await this.o.pool.query<Row>(
      `SELECT id::text AS id, at, who, via, token_id, from_addr, action, node_id, target, detail, outcome FROM audit
        ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ${p(q.limit + 1)}`,
      params,
    );
    const entries = rows.slice(0, q.limit).map(entryOf);
    // The family filter in SQL matches `reservation.%`; `actionMatches` says the same for every row.
    return { entries: entries.filter((e) => q.action === undefined || actionMatches(q.action, e.action)), next_before: rows.length > q.limit ? entries.at(-1)!.id : null };
  }
}

const entryOf = (r: Row): AuditEntry => ({
  id: r.id,
  at: r.at.toISOString(),
  who: r.who,
  via: r.via as AuditVia,
  token_id: r.token_id,
  from: r.from_addr,
  action: r.action as AuditEntry['action'],
  node: r.node_id,
  target: r.target,
  detail: r.detail,
  outcome: r.outcome,
});

