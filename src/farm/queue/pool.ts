/**
 * A pool in maintenance (docs/health-checks.md, "A pool in maintenance"): the administrator's `farmhand farm pool
 * maintenance device=roku --reason "..."` writes a row (pool_maintenance); the portal process each node of the pool is
 * connected to puts that node in maintenance by the node's own maintenance, the very path of `POST
 * /api/v2/nodes/<id>/maintenance` through the portal (the request forwarded over the node's connection, on behalf of
 * the administrator): the node keeps it in its state file, refuses new runs and reservations, lets its running job
 * finish, and its state tells every replica (`maintenance` availability, which the queue and the pages read).
 *
 * The message is `pool <selector>: <reason>`, so that the end of the pool's maintenance (`--end`) takes out only the
 * nodes the pool put in: a node an administrator put in maintenance by itself keeps its own. A node of the pool that
 * is offline meanwhile is put in maintenance when it connects; a node given the pool's labels later, at the next look.
 *
 * Looks again: at a change of pool_maintenance (its trigger's NOTIFY, kind `pool_maintenance`), a node coming online,
 * and every `pollMs` (labels changed).
 */
import type pg from 'pg';
import type { NewAuditEntry } from '../../core/audit.js';
import type { FarmEvent } from '../../core/events.js';
import type { Logger } from '../../core/ports.js';
import { matches } from '../../core/queue.js';
import type { FarmHub, NodeLink } from '../contract.js';
import { allNodeLabels } from './labels.js';
import type { QueueWakeups } from './ports.js';
import { poolMaintenances, poolMessage, poolOfMessage } from './poolStore.js';

export interface PoolMaintenanceOptions {
  pool: pg.Pool;
  hub: Pick<FarmHub, 'link' | 'links' | 'onEvent' | 'forward'>;
  /** The portal's base URL (its public_url), as for any forward. */
  baseUrl: string;
  wakeups?: QueueWakeups | undefined;
  logger?: Logger | undefined;
  /** The audit trail: `node.maintenance` for each node the pool puts in or takes out. */
  audit?: { record(entry: NewAuditEntry): void } | undefined;
  /** A look at least this often (default 30 s): a node's labels changed. */
  pollMs?: number | undefined;
  startTimeoutMs?: number | undefined;
}

/** What a node's maintenance is now, as its state says (the v2 Node object's `maintenance`). */
const currentMessage = (link: NodeLink): string | null => {
  const m = link.snapshot?.maintenance as { message?: unknown } | undefined | null;
  return typeof m?.message === 'string' ? m.message : null;
};

export class PoolMaintenance {
  /** What this process last asked of each node (a message: on; null: off), so a state not yet updated is not asked again. */
  private readonly sent = new Map<string, string | null>();
  private readonly unsubscribe: (() => void)[] = [];
  private looping: Promise<void> | undefined;
  private dirty = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  /** Looks taken, for tests. */
  passes = 0;

  constructor(private readonly o: PoolMaintenanceOptions) {}

  start(): void {
    this.unsubscribe.push(this.o.hub.onEvent((e: FarmEvent) => this.onEvent(e)));
    if (this.o.wakeups) for (const kind of ['pool_maintenance', 'resync']) this.unsubscribe.push(this.o.wakeups.on(kind, () => this.wake()));
    this.wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    for (const off of this.unsubscribe.splice(0)) off();
    await this.looping;
  }

  wake(): void {
    if (this.closed) return;
    this.dirty = true;
    this.looping ??= this.loop().finally(() => {
      this.looping = undefined;
      if (this.closed) return;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.wake(), this.o.pollMs ?? 30_000);
      this.timer.unref();
    });
  }

  private onEvent(e: FarmEvent): void {
    if (e.type !== 'node.online') return;
    // A new connection: what was asked of the node before is not known to hold (it may have restarted from older state).
    this.sent.delete(e.data.node_id);
    this.wake();
  }

  private async loop(): Promise<void> {
    while (this.dirty && !this.closed) {
      this.dirty = false;
      try {
        await this.pass();
      } catch (err) {
        this.o.logger?.warn({ err }, 'pool maintenance: a look failed; trying again at the next change or poll');
      }
    }
  }

  /** Each node connected here: in maintenance while a pool of its is, taken out when the pool that put it in is not. */
  private async pass(): Promise<void> {
    this.passes++;
    const pools = await poolMaintenances(this.o.pool);
    const labels = await allNodeLabels(this.o.pool);
    const asks: Promise<void>[] = [];
    for (const link of this.o.hub.links()) {
      if (!link.online) continue;
      const want = pools.find((p) => matches(labels.get(link.nodeId) ?? {}, p.labels));
      const current = currentMessage(link);
      const sent = this.sent.get(link.nodeId);
      if (want) {
        const message = poolMessage(want);
        const theirs = current !== null && poolOfMessage(current) === undefined;
        if (current !== message && !theirs && sent !== message) asks.push(this.ask(link.nodeId, want.selector, want.set_by, message));
      } else if (poolOfMessage(current) !== undefined && sent !== null) {
        asks.push(this.ask(link.nodeId, poolOfMessage(current)!, 'farmhand', null));
      }
    }
    await Promise.all(asks);
  }

  /** POST /api/v2/nodes/<id>/maintenance on the node, as the administrator who set the pool's (its end: as `farmhand`). */
  private async ask(nodeId: string, selector: string, user: string, message: string | null): Promise<void> {
    const body = Buffer.from(JSON.stringify(message === null ? { on: false } : { on: true, message }));
    const headers = { 'content-type': 'application/json', accept: 'application/json' };
    const path = `/api/v2/nodes/${encodeURIComponent(nodeId)}/maintenance`;
    try {
      const res = await this.o.hub.forward(nodeId, { method: 'POST', path, headers, body, user, baseUrl: this.o.baseUrl }, AbortSignal.timeout(this.o.startTimeoutMs ?? 30_000));
      const text = await readText(res.body);
      if (res.status !== 200) throw new Error(`the node answered ${res.status}: ${text.slice(0, 300)}`);
      this.sent.set(nodeId, message);
      this.o.logger?.info({ node: nodeId, on: message !== null }, `pool maintenance: node ${nodeId} ${message === null ? 'taken out of' : 'put in'} maintenance`);
      const detail = { on: message !== null, message, pool: selector };
      this.o.audit?.record({ at: new Date().toISOString(), who: user, via: 'portal', token_id: null, from: null, action: 'node.maintenance', node: nodeId, target: nodeId, detail, outcome: 200 });
    } catch (err) {
      this.o.logger?.warn({ err, node: nodeId }, 'pool maintenance: the node could not be asked; trying again at the next look');
      setTimeout(() => this.wake(), 2_000).unref();
    }
  }
}

async function readText(stream: AsyncIterable<Buffer | string>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(parts).toString('utf8').slice(0, 64 * 1024);
}
