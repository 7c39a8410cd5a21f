/**
 * Node labels in PostgreSQL (table node_labels, migration 15; docs/queue.md): read by the queue and the portal,
 * written only by the farm's administrator (`farmhand farm node label`). A node never sets its own labels: nothing
 * of its hello or state is read here.
 */
import type pg from 'pg';
import { FarmError } from '../../core/errors.js';
import { checkLabel, MAX_LABELS, sortLabels, type Labels } from '../../core/queue.js';

type Db = Pick<pg.Pool, 'query'>;

/** Every registered node's labels (a node without any has `{}`). */
export async function allNodeLabels(db: Db): Promise<Map<string, Labels>> {
  const { rows } = await db.query<{ node_id: string; key: string | null; value: string | null }>(
    'SELECT n.node_id, l.key, l.value FROM nodes n LEFT JOIN node_labels l USING (node_id) ORDER BY n.node_id, l.key',
  );
  const out = new Map<string, Labels>();
  for (const r of rows) {
    const l = out.get(r.node_id) ?? {};
    if (r.key !== null && r.value !== null) l[r.key] = r.value;
    out.set(r.node_id, l);
  }
  return out;
}

/** One node's labels; not_found for a node that is not registered. */
export async function nodeLabels(db: Db, nodeId: string): Promise<Labels> {
  const labels = (await allNodeLabels(db)).get(nodeId);
  if (!labels) throw new FarmError('not_found', `no node ${JSON.stringify(nodeId)} is registered; farmhand farm node list shows them`);
  return labels;
}

/**
 * Set (add or replace) and remove labels of a node, in one transaction; returns the labels before and after.
 * A key both set and removed is refused, as is a node left with more than MAX_LABELS.
 */
export async function setNodeLabels(pool: pg.Pool, nodeId: string, set: Labels, remove: readonly string[]): Promise<{ before: Labels; after: Labels }> {
  for (const [k, v] of Object.entries(set)) checkLabel(k, v);
  const both = remove.find((k) => k in set);
  if (both !== undefined) throw new FarmError('invalid_request', `label ${both} is both set and removed; give one`);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const node = await client.query('SELECT 1 FROM nodes WHERE node_id = $1 FOR UPDATE', [nodeId]);
    if (node.rowCount === 0) throw new FarmError('not_found', `no node ${JSON.stringify(nodeId)} is registered; farmhand farm node list shows them`);
    const before = await labelsIn(client, nodeId);
    if (remove.length) await client.query('DELETE FROM node_labels WHERE node_id = $1 AND key = ANY($2::text[])', [nodeId, remove]);
    const keys = Object.keys(set);
    if (keys.length) {
      await client.query(
        `INSERT INTO node_labels (node_id, key, value) SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS t(k, v)
         ON CONFLICT (node_id, key) DO UPDATE SET value = EXCLUDED.value`,
        [nodeId, keys, keys.map((k) => set[k])],
      );
    }
    const after = await labelsIn(client, nodeId);
    if (Object.keys(after).length > MAX_LABELS) throw new FarmError('invalid_request', `a node has at most ${MAX_LABELS} labels`);
    await client.query('COMMIT');
    return { before, after };
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}

async function labelsIn(db: Db, nodeId: string): Promise<Labels> {
  const { rows } = await db.query<{ key: string; value: string }>('SELECT key, value FROM node_labels WHERE node_id = $1', [nodeId]);
  return sortLabels(Object.fromEntries(rows.map((r) => [r.key, r.value])));
}
