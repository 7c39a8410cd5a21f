/**
 * Node ownership with an epoch (docs/farm.md, "Many portals"; migration 10): with replicas "many", a node is
 * owned by the replica it said hello to, at an epoch raised at every change of owner, and every write a replica
 * makes about a node is conditioned on `owner_replica = <me> AND owner_epoch = <the epoch taken at hello>`. A
 * write that matches no row means the node moved to another replica (or the sweeper took it from a replica whose
 * lease lapsed): the replica drops the node's connection and writes nothing more about it.
 *
 * A Tenure is that condition. `undefined` where one is expected means replicas "single": no condition, today's
 * writes exactly. `replica: null` is the sweeper's: a node no live replica owns, at the epoch the sweeper saw.
 */
import type pg from 'pg';
import { WAKEUP_CHANNEL } from '../wakeups.js';

export interface Tenure {
  /** The owner the write needs: this replica's id, or null for a node no replica owns (the sweeper's). */
  replica: string | null;
  epoch: number;
}

/** A write about a node matched no row: the node is no longer this replica's at this epoch. */
export class NodeMoved extends Error {
  override readonly name = 'NodeMoved';
  constructor(
    readonly nodeId: string,
    readonly tenure: Tenure,
  ) {
    super(`node ${nodeId} is no longer owned by ${tenure.replica ?? 'no replica'} at epoch ${tenure.epoch}: it moved to another portal replica`);
  }
}

type Queryable = Pick<pg.ClientBase, 'query'>;

/**
 * The SQL condition of a tenure on the `nodes` row (`table` its name or alias), its parameters numbered from
 * `from`; empty for no tenure (replicas "single").
 */
export function tenureSql(t: Tenure | undefined, from: number, table = 'nodes'): { sql: string; params: unknown[] } {
  if (!t) return { sql: '', params: [] };
  return {
    sql: ` AND ${table}.owner_replica IS NOT DISTINCT FROM $${from}::text AND ${table}.owner_epoch = $${from + 1}::bigint`,
    params: [t.replica, t.epoch],
  };
}

/**
 * A node's hello on replica `replicaId`: the node is this replica's now, at a new epoch (returned), and online.
 * One statement: the row lock orders it with any other replica's conditioned write (which then matches nothing).
 * The same statement tells every replica (a `node_owner` wake-up on the channel `farmhand`, sent at its commit), so
 * that the requests they hold for the node while it was between owners go to it at once (nodePlace.ts).
 */
export async function takeNode(q: Queryable, replicaId: string, nodeId: string, version: string, seen: string, ip: string | null = null): Promise<number> {
  const { rows } = await q.query<{ owner_epoch: string }>(
    `WITH taken AS (
       UPDATE nodes SET owner_replica = $2, owner_epoch = owner_epoch + 1, online = true, offline_reason = NULL, version = $3, last_seen = $4, external_ip = $5
        WHERE node_id = $1 RETURNING owner_epoch)
     SELECT owner_epoch, pg_notify('${WAKEUP_CHANNEL}', json_build_object('kind', 'node_owner', 'node_id', $1::text, 'replica', $2::text)::text) FROM taken`,
    [nodeId, replicaId, version, seen, ip],
  );
  if (!rows[0]) throw new Error(`node ${nodeId} has no row (it was removed from the farm)`);
  return Number(rows[0].owner_epoch);
}

/**
 * In a transaction: lock the node's row while the tenure holds (the transaction's writes about the node then
 * commit before any change of owner, or not at all); throws NodeMoved when it does not hold. Nothing for no tenure.
 */
export async function holdNode(client: Queryable, nodeId: string, t: Tenure | undefined): Promise<void> {
  if (!t) return;
  const c = tenureSql(t, 2);
  const { rowCount } = await client.query(`SELECT 1 FROM nodes WHERE node_id = $1${c.sql} FOR UPDATE`, [nodeId, ...c.params]);
  if ((rowCount ?? 0) === 0) throw new NodeMoved(nodeId, t);
}

/**
 * The replica's clean stop: its nodes are no one's (epoch raised, offline with `reason`), so the sweeper of any
 * live replica gives their running jobs the restart grace, and a node reconnecting elsewhere takes them at once.
 */
export async function releaseNodes(q: Queryable, replicaId: string, held: { nodeId: string; epoch: number }[], reason: string): Promise<string[]> {
  if (held.length === 0) return [];
  const { rows } = await q.query<{ node_id: string }>(
    `UPDATE nodes SET owner_replica = NULL, owner_epoch = owner_epoch + 1, online = false, offline_reason = $4
       FROM unnest($2::text[], $3::bigint[]) AS v(id, e)
      WHERE nodes.node_id = v.id AND nodes.owner_replica = $1 AND nodes.owner_epoch = v.e
      RETURNING nodes.node_id`,
    [replicaId, held.map((h) => h.nodeId), held.map((h) => h.epoch), reason],
  );
  return rows.map((r) => r.node_id);
}

/** A replica's start: the nodes its id still owns (a previous process of the same replica_id) become no one's. */
export async function releaseOwnedAtStart(q: Queryable, replicaId: string): Promise<void> {
  await q.query(
    `UPDATE nodes SET owner_replica = NULL, owner_epoch = owner_epoch + 1, online = false, offline_reason = 'not connected since the portal started'
      WHERE owner_replica = $1`,
    [replicaId],
  );
}
