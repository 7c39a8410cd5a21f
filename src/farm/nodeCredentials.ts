/**
 * Node credentials: a node joins the farm with a credential made on the portal
 * (`farmhand farm node add <id>`), shown once, kept by the node in the file its
 * config's `portal.node_credential_file` names. The `nodes` table keeps only the
 * credential's sha256 (a credential is 256 random bits: a slow hash would add
 * nothing, as src/storage/tokens.ts explains for tokens).
 *
 * Credential text: `fhn_` + 43 base64url characters (32 random bytes). The
 * prefix tells it apart from a v2 token (`fh_...`) in a secret scanner or a log.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { invalid, notFound } from '../core/errors.js';
import type { NodeCredentials } from './contract.js';
import { inTransaction } from './db/pool.js';

/** As the node config's `node_id` (src/config/schema.ts). */
export const NODE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const NODE_CREDENTIAL_PREFIX = 'fhn_';
const CREDENTIAL_RE = /^fhn_[A-Za-z0-9_-]{43}$/;

/** The channel migration 3's trigger notifies (payload: the node id) when a node is added, re-keyed or removed. */
export const NODE_CREDENTIALS_CHANNEL = 'farm_node_credentials';

const hashCredential = (credential: string): Buffer => createHash('sha256').update(credential, 'utf8').digest();

export function checkNodeId(nodeId: string): string {
  if (!NODE_ID_RE.test(nodeId)) {
    throw invalid(`node id ${JSON.stringify(nodeId)} is not allowed: use 1 to 63 letters, digits, ".", "_" or "-", starting with a letter or digit (as a node's node_id)`);
  }
  return nodeId;
}

/**
 * Register a node, or re-key a registered one (its old credential stops working at once; the hub
 * is notified on `farm_node_credentials` and may drop the node's connection). Returns the new
 * credential: the only copy there will be.
 */
export async function registerNode(pool: pg.Pool, nodeId: string): Promise<string> {
  checkNodeId(nodeId);
  const credential = NODE_CREDENTIAL_PREFIX + randomBytes(32).toString('base64url');
  await pool.query(
    `INSERT INTO nodes (node_id, credential_hash) VALUES ($1, $2)
     ON CONFLICT (node_id) DO UPDATE SET credential_hash = EXCLUDED.credential_hash`,
    [nodeId, hashCredential(credential).toString('hex')],
  );
  return credential;
}

export interface RemovedNode {
  /** Reservation rows of this node that were removed, and how many of them were still active. */
  reservations: number;
  activeReservations: number;
  jobs: number;
}

/**
 * Remove a node from the farm, in one transaction: its row, and the rows that refer to it (its
 * jobs, its reservation rows, an active one included: the operator removing a box must never be
 * stuck behind someone's reservation). Results stay in the results index. FarmError('not_found')
 * when no such node is registered.
 */
export async function removeNode(pool: pg.Pool, nodeId: string): Promise<RemovedNode> {
  return inTransaction(pool, async (client) => {
    const found = await client.query('SELECT 1 FROM nodes WHERE node_id = $1 FOR UPDATE', [nodeId]);
    if (!found.rowCount) throw notFound(`no node ${nodeId} is registered`);
    const res = await client.query<{ active: boolean }>('DELETE FROM reservation_nodes WHERE node_id = $1 RETURNING active', [nodeId]);
    const jobs = await client.query('DELETE FROM jobs WHERE node_id = $1', [nodeId]);
    await client.query('DELETE FROM nodes WHERE node_id = $1', [nodeId]);
    return { reservations: res.rowCount ?? 0, activeReservations: res.rows.filter((r) => r.active).length, jobs: jobs.rowCount ?? 0 };
  });
}

export interface RegisteredNode {
  nodeId: string;
  /** ISO 8601. */
  registered: string;
  /** ISO 8601 of the last batched heartbeat flush, or null. */
  lastSeen: string | null;
  online: boolean;
  offlineReason: string | null;
  version: string | null;
  /** False for a node row made by another part without a credential (it cannot connect). */
  hasCredential: boolean;
}

export async function listNodes(pool: pg.Pool): Promise<RegisteredNode[]> {
  const { rows } = await pool.query<{
    node_id: string;
    registered_at: Date;
    last_seen: Date | null;
    online: boolean;
    offline_reason: string | null;
    version: string | null;
    has_credential: boolean;
  }>(
    `SELECT node_id, registered_at, last_seen, online, offline_reason, version, credential_hash IS NOT NULL AS has_credential
       FROM nodes ORDER BY node_id`,
  );
  return rows.map((r) => ({
    nodeId: r.node_id,
    registered: r.registered_at.toISOString(),
    lastSeen: r.last_seen?.toISOString() ?? null,
    online: r.online,
    offlineReason: r.offline_reason,
    version: r.version,
    hasCredential: r.has_credential,
  }));
}

/**
 * What the hub asks when a node connects. One indexed read per connection (connections are rare:
 * heartbeats ride on the open one). The comparison is constant-time, and an unknown node costs the
 * same comparison as a known one.
 */
export class PgNodeCredentials implements NodeCredentials {
  private readonly dummy = randomBytes(32);

  constructor(
    private readonly pool: pg.Pool,
    private readonly equal: (a: Buffer, b: Buffer) => boolean = timingSafeEqual,
  ) {}

  async verify(nodeId: string, presentedText: string): Promise<boolean> {
    // The file the node reads it from ends in a newline; surrounding white space is never part of it.
    const credential = presentedText.trim();
    if (!NODE_ID_RE.test(nodeId)) return false;
    const { rows } = await this.pool.query<{ credential_hash: string | null }>('SELECT credential_hash FROM nodes WHERE node_id = $1', [nodeId]);
    const stored = rows[0]?.credential_hash;
    const presented = hashCredential(credential);
    const same = this.equal(presented, stored ? Buffer.from(stored, 'hex') : this.dummy);
    return same && Boolean(stored) && CREDENTIAL_RE.test(credential);
  }
}
