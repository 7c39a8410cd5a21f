/**
 * The portal's fold of a node's stream (docs/farm.md, "The node stream"): a batch of one node's events, in the
 * node's order, into the portal's tables in ONE transaction: the jobs rows (jobs.ts), the results rows (each
 * `run.finished`'s record, results.ts), the outbox rows (events.ts, once it is attached) and the node's cursor
 * (`node_event_cursors`, the last event folded). Events at or before the cursor are skipped: an event the node
 * sends again (the portal died between the commit and its ack) is folded once. The hub (hub/intake.ts) makes the
 * batches, retries a batch while the database is away and acknowledges it after the commit.
 */
import type pg from 'pg';
import type { FarmEvent } from '../core/events.js';
import { parseResultId } from '../core/ids.js';
import type { ResultRecord } from '../core/model.js';
import type { Logger } from '../core/ports.js';
import { checkRecord } from '../storage/results/record.js';
import { inTransaction } from './db/pool.js';
import { recountEndedJob } from './storedResults.js';
import type { OutboxEntry } from './events.js';
import type { FarmJobs } from './jobs.js';
import { nodeEventOrder } from './protocol.js';
import { holdNode, type Tenure } from './replicas/ownership.js';
import type { FarmResults } from './results.js';

/** One event of a node's stream as the hub received it. */
export interface StreamItem {
  event: FarmEvent;
  /** With run.finished: the node's record of the run (unchecked: the node's word). */
  record?: unknown;
  /** Refused by the hub (it names another node's job or result): folded as nothing, the cursor moves past it. */
  refused?: boolean;
  /** The bytes of its frame (the hub's inbox bound). */
  bytes?: number;
}

/** What the hub asks of the fold. */
export interface HubFold {
  /** Fold one node's events in one transaction; resolves with the events kept (to publish), after the commit. */
  fold(nodeId: string, items: readonly StreamItem[], tenure?: Tenure): Promise<FarmEvent[]>;
  /** The id of the last of the node's events folded (the welcome's last_event_id); null when none. */
  cursor(nodeId: string): Promise<string | null>;
  /** The node's last state folded (the payload of its last node.state, and that event's id); null when none. */
  state(nodeId: string): Promise<{ data: unknown; event_id: string } | null>;
}

/** Where the fold writes the outbox rows of the events it keeps (PgEventLog.appendIn, which takes the outbox's lock). */
export interface FoldOutbox {
  appendIn(client: pg.ClientBase, entries: readonly OutboxEntry[]): Promise<number[]>;
}

export interface PgNodeFoldOptions {
  pool: pg.Pool;
  jobs: Pick<FarmJobs, 'record'>;
  results: Pick<FarmResults, 'putIn' | 'notePut'>;
  logger: Logger;
}

type Order = [number, number];
const after = (a: Order, b: Order | null) => b === null || a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);

/**
 * The items after the node's cursor, which is locked (a second fold of the same node, another portal's, waits for
 * this one), and the last of them with an ordered id (the new cursor). An item at or before the cursor was folded
 * before and sent again after a lost ack.
 */
async function freshItems(client: pg.ClientBase, nodeId: string, items: readonly StreamItem[]): Promise<{ fresh: StreamItem[]; last: { at: Order; id: string } | undefined }> {
  const { rows } = await client.query<{ boot: string; n: string }>('SELECT boot, n FROM node_event_cursors WHERE node_id = $1 FOR UPDATE', [nodeId]);
  let cursor: Order | null = rows[0] ? [Number(rows[0].boot), Number(rows[0].n)] : null;
  let last: { at: Order; id: string } | undefined;
  const fresh: StreamItem[] = [];
  for (const item of items) {
    const at = nodeEventOrder(item.event.id);
    if (at) {
      if (!after(at, cursor)) continue;
      cursor = at;
      last = { at, id: item.event.id };
    }
    fresh.push(item);
  }
  return { fresh, last };
}


export class PgNodeFold implements HubFold {
  /** Set by PgEventLog.attach: the outbox rows go in the fold's transaction. */
  outbox: FoldOutbox | undefined;
  /** Transactions committed and events folded (kept, dropped or refused) since start (the bench reads them). */
  readonly stats = { transactions: 0, events: 0, recordsRefused: 0 };

  constructor(private readonly o: PgNodeFoldOptions) {}

  async cursor(nodeId: string): Promise<string | null> {
    const { rows } = await this.o.pool.query<{ event_id: string }>('SELECT event_id FROM node_event_cursors WHERE node_id = $1', [nodeId]);
    return rows[0]?.event_id ?? null;
  }

  async state(nodeId: string): Promise<{ data: unknown; event_id: string } | null> {
    const { rows } = await this.o.pool.query<{ state: unknown; state_event_id: string }>(
      'SELECT state, state_event_id FROM nodes WHERE node_id = $1 AND state IS NOT NULL',
      [nodeId],
    );
    return rows[0] ? { data: rows[0].state, event_id: rows[0].state_event_id } : null;
  }

  /**
   * With a tenure (replicas "many"), only while the node is owned as it says: the node's row is locked first, and
   * NodeMoved thrown (nothing written) when it moved to another replica (src/farm/replicas/ownership.ts).
   */
  async fold(nodeId: string, items: readonly StreamItem[], tenure?: Tenure): Promise<FarmEvent[]> {
    const { kept, records, folded } = await inTransaction(this.o.pool, async (client) => {
      await holdNode(client, nodeId, tenure);
      const { fresh, last } = await freshItems(client, nodeId, items);
      const finished = fresh.filter((item) => !item.refused && item.event.type === 'run.finished' && item.record !== undefined);
      const records = finished.flatMap((item) => this.recordOf(nodeId, item) ?? []);
      // The records first: a job.exited of this batch then finds its runs' results already in the index.
      await this.putRecords(client, records);
      const kept = await this.keepEvents(client, nodeId, fresh);
      if (last) {
        await client.query(
          `INSERT INTO node_event_cursors AS c (node_id, boot, n, event_id) VALUES ($1, $2, $3, $4)
           ON CONFLICT (node_id) DO UPDATE SET boot = EXCLUDED.boot, n = EXCLUDED.n, event_id = EXCLUDED.event_id, updated_at = now()`,
          [nodeId, last.at[0], last.at[1], last.id],
        );
      }
      // Last: appendIn takes the outbox's lock, which every other append waits for until this commits.
      await this.outbox?.appendIn(
        client,
        kept.map((e) => ({ type: e.type, nodeId, data: e.data, time: e.time, nodeEventId: e.id })),
      );
      return { kept, records, folded: fresh.length };
    });
    this.stats.transactions++;
    this.stats.events += folded;
    this.o.results.notePut(records);
    return kept;
  }

  /**
   * The batch's job events into the jobs table: the events kept (to publish; a late event of a job the portal
   * ended is dropped). The node's state (internal: not in the outbox): the last of the batch goes in its nodes row.
   */
  private async keepEvents(client: pg.ClientBase, nodeId: string, fresh: readonly StreamItem[]): Promise<FarmEvent[]> {
    const kept: FarmEvent[] = [];
    let state: FarmEvent | undefined;
    for (const item of fresh) {
      if (item.refused) continue;
      if (item.event.type === 'node.state') state = item.event;
      else if (await this.o.jobs.record(item.event, client)) kept.push(item.event);
      else this.o.logger.info({ node: nodeId, type: item.event.type, job: (item.event.data as { job_uid?: string }).job_uid }, 'dropped a late event of a job the portal ended');
    }
    if (state) {
      const { node_id: _n, ...data } = state.data;
      await client.query('UPDATE nodes SET state = $2, state_event_id = $3 WHERE node_id = $1', [nodeId, JSON.stringify(data), state.id]);
    }
    return kept;
  }

  /**
   * The records into the index, as the upload API's record did (storedResults.ts): a run the portal declared lost
   * (its job ended by the portal) keeps the portal's account; a run of such a job the portal never heard of is
   * added, and that job's counts become the index's. A record of a result the portal deleted comes back.
   */
  private async putRecords(client: pg.ClientBase, records: ResultRecord[]): Promise<void> {
    if (records.length === 0) return;
    const uids = [...new Set(records.map((r) => r.job_uid))];
    const ended = new Set(
      (await client.query<{ job_uid: string }>('SELECT job_uid FROM jobs WHERE job_uid = ANY($1::text[]) AND end_reason IS NOT NULL', [uids])).rows.map((r) => r.job_uid),
    );
    let put = records;
    if (ended.size > 0) {
      const ids = records.filter((r) => ended.has(r.job_uid)).map((r) => r.result_id);
      const known = new Set((await client.query<{ result_id: string }>('SELECT result_id FROM results WHERE result_id = ANY($1::text[])', [ids])).rows.map((r) => r.result_id));
      put = records.filter((r) => !(ended.has(r.job_uid) && known.has(r.result_id)));
    }
    await this.o.results.putIn(client, put);
    await client.query('DELETE FROM results_deleted WHERE result_id = ANY($1::text[])', [put.map((r) => r.result_id)]);
    for (const uid of ended) await recountEndedJob(client, uid);
    records.splice(0, records.length, ...put);
  }

  /** A run.finished's record, if it is the node's own record of that run; else undefined (logged, counted). */
  private recordOf(nodeId: string, item: StreamItem): ResultRecord | undefined {
    const d = item.event.data as { result_id?: unknown; job_uid?: unknown };
    const rec = checkRecord(item.record);
    const p = typeof rec === 'string' ? undefined : parseResultId(rec.result_id);
    const why =
      typeof rec === 'string'
        ? rec
        : !p || p.job.nodeId !== nodeId || rec.job_uid !== p.jobUid
          ? 'its result_id is not a run of this node'
          : rec.result_id !== d.result_id || rec.job_uid !== d.job_uid
            ? "it is not the record of the event's run"
            : undefined;
    if (why === undefined) return rec as ResultRecord;
    this.stats.recordsRefused++;
    this.o.logger.warn({ node: nodeId, event: item.event.id, why }, "refused a run's record from a node's stream (the run's event is folded without it)");
    return undefined;
  }
}
