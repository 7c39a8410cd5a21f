/**
 * bench/queue-bench.ts's gap, as issue 32 words it: "no node idle while a job it matches waits", measured as the time
 * from a node freeing (its job's end_time) to its next queued job starting (that job's start_time), whenever a job of
 * its pool was waiting at the freeing, **less the time the node was offline in between** (the portal's events outbox:
 * `node.offline` / `node.online`, both the node's connection and its capture; an offline node is not idle).
 *
 * Times: job start/end are the node's, the outbox events' `time` the node's (its own capture events) or the
 * portal's insert time (`at`, the connection's events): one machine, one clock.
 */
import type pg from 'pg';
import { freedGaps, type IdleNode, type QueueRun } from '../../test/helpers/queueScale.js';

export interface Span {
  from: number;
  to: number;
}

export interface OfflineGap {
  node_id: string;
  /** The node's job end, and its next job's start (or, never given another, the last claim of a job then waiting). */
  from: number;
  to: number;
  /** The whole gap, the part of it the node was offline, and the rest (what the target judges). */
  rawMs: number;
  offlineMs: number;
  gapMs: number;
  neverAgain: boolean;
}

/**
 * Each node's offline spans from the outbox, in time order. Any `node.offline` opens a span (if none is open), the
 * next `node.online` closes it; one still open at the end runs to +Infinity.
 */
export async function offlineSpans(db: pg.Pool, nodes: readonly string[]): Promise<{ spans: Map<string, Span[]>; events: number }> {
  const { rows } = await db.query<{ node_id: string; type: string; ms: number }>(
    `SELECT node_id, type, extract(epoch FROM coalesce(time, at))::float8 * 1000 AS ms FROM events_outbox
      WHERE type IN ('node.online', 'node.offline') AND node_id = ANY($1::text[]) ORDER BY coalesce(time, at), seq`,
    [nodes],
  );
  const spans = new Map<string, Span[]>();
  for (const r of rows) {
    const list = spans.get(r.node_id) ?? [];
    spans.set(r.node_id, list);
    const open = list.at(-1)?.to === Infinity ? list.at(-1) : undefined;
    if (r.type === 'node.offline' && !open) list.push({ from: r.ms, to: Infinity });
    if (r.type === 'node.online' && open) open.to = r.ms;
  }
  return { spans, events: rows.length };
}

/** How much of [from, to] the spans cover (spans do not overlap one another). */
export function overlapMs(spans: readonly Span[], from: number, to: number): number {
  return spans.reduce((n, s) => n + Math.max(0, Math.min(to, s.to) - Math.max(from, s.from)), 0);
}

/** The gaps of test/helpers/queueScale.ts freedGaps, each less the node's offline time within it. */
export function offlineFreeGaps(runs: readonly QueueRun[], spans: ReadonlyMap<string, Span[]>): OfflineGap[] {
  return freedGaps(runs).map((g) => {
    const offlineMs = overlapMs(spans.get(g.node_id) ?? [], g.from, g.to);
    return { node_id: g.node_id, from: g.from, to: g.to, rawMs: g.gapMs, offlineMs, gapMs: Math.max(0, g.gapMs - offlineMs), neverAgain: g.neverAgain };
  });
}

/**
 * What the portal heard of a node between `from` and `to` (ms since the epoch), from the events outbox: each event's
 * type and offset, with the job or the availability it names; for reading where a large gap went.
 */
export async function nodeEventsBetween(db: pg.Pool, nodeId: string, from: number, to: number): Promise<string> {
  const { rows } = await db.query<{ type: string; ms: number; data: Record<string, unknown> }>(
    `SELECT type, extract(epoch FROM coalesce(time, at))::float8 * 1000 AS ms, data FROM events_outbox
      WHERE node_id = $1 AND coalesce(time, at) BETWEEN to_timestamp($2::float8 / 1000) AND to_timestamp($3::float8 / 1000) ORDER BY coalesce(time, at), seq LIMIT 30`,
    [nodeId, from, to],
  );
  const what = (d: Record<string, unknown>) => {
    const a = d.availability as { kind?: string } | undefined;
    return [d.job_uid, a?.kind, d.reason].filter((x) => typeof x === 'string').join(' ');
  };
  return rows.map((r) => `+${((r.ms - from) / 1000).toFixed(1)} s ${r.type}${what(r.data) ? ` (${what(r.data)})` : ''}`).join(', ') || 'none';
}

/**
 * The idle nodes (test/helpers/queueScale.ts idleNodes) that were online through as long a stretch as the other
 * node's whole job: an idle node that spent the wait offline (no picture) could not have taken the job.
 */
export function idleWhileOnline(idle: readonly IdleNode[], runs: readonly QueueRun[], spans: ReadonlyMap<string, Span[]>): IdleNode[] {
  const byId = new Map(runs.map((r) => [r.queue_id, r]));
  return idle.filter((i) => {
    const x = byId.get(i.meanwhile);
    const to = i.nextClaim ?? Math.max(...runs.map((r) => r.end ?? 0));
    if (!x?.end || x.claimed_at === null) return true;
    const online = to - i.freedAt - overlapMs(spans.get(i.node_id) ?? [], i.freedAt, to);
    return online >= x.end - x.claimed_at;
  });
}
