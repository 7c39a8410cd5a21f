/**
 * OIDC sign-ins in progress on the portal, in PostgreSQL (`oidc_flows`, migration 14; docs/auth.md, "Sign-in
 * with OpenID Connect", "Many portals"): the provider's callback lands on whichever replica the load balancer
 * picks, not the one that started the flow. The node keeps its flows in memory (src/http/oidc.ts
 * `MemoryFlowStore`); both answer `OidcFlowStore` with the same rules.
 *
 * - Used once by construction: `take` is one `DELETE ... RETURNING`; of two callbacks with the same cookie, on
 *   one replica or on two, PostgreSQL gives the row to one only.
 * - Expiry by the database's clock (`now()`), not the replicas': a flow is refused past its `expires_at` even
 *   when its row is still there; expired rows are swept at each start of a sign-in (an index on `expires_at`).
 * - Bounded: at most `FLOW_LIMIT` rows, the ones expiring first dropped, whoever starts sign-ins.
 * - Only the sha256 of the flow id (the cookie's value) is stored, never the id.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { FLOW_LIMIT, type OidcFlow, type OidcFlowStore } from '../http/oidc.js';

const hashOf = (id: string): Buffer => createHash('sha256').update(id, 'utf8').digest();

interface Row {
  state: string;
  nonce: string;
  verifier: string;
  next: string;
  redirect_uri: string;
  live: boolean;
}

export class PgFlowStore implements OidcFlowStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly limit = FLOW_LIMIT,
  ) {}

  async put(id: string, flow: OidcFlow, ttlMs: number): Promise<void> {
    await this.pool.query('DELETE FROM oidc_flows WHERE expires_at <= now()');
    await this.pool.query(
      `INSERT INTO oidc_flows (id_hash, state, nonce, verifier, next, redirect_uri, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7::double precision / 1000))`,
      [hashOf(id), flow.state, flow.nonce, flow.verifier, flow.next, flow.redirectUri, ttlMs],
    );
    // Bounded, like the node's Map: beyond the limit, the flows expiring first go.
    await this.pool.query(
      `DELETE FROM oidc_flows WHERE id_hash IN (SELECT id_hash FROM oidc_flows ORDER BY expires_at DESC, id_hash OFFSET $1)`,
      [this.limit],
    );
  }

  async take(id: string): Promise<OidcFlow | undefined> {
    const { rows } = await this.pool.query<Row>(
      `DELETE FROM oidc_flows WHERE id_hash = $1
       RETURNING state, nonce, verifier, next, redirect_uri, expires_at > now() AS live`,
      [hashOf(id)],
    );
    const r = rows[0];
    if (!r?.live) return undefined;
    return { state: r.state, nonce: r.nonce, verifier: r.verifier, next: r.next, redirectUri: r.redirect_uri };
  }

  /** Flows waiting (tests). */
  async size(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM oidc_flows');
    return rows[0]!.n;
  }
}
