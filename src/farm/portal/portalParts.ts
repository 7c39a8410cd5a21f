/**
 * What the portal's composition root (portal.ts) builds its parts with: the
 * secrets read before anything starts, the server's listen and close, the
 * sign-in with OpenID Connect, the sweeper of a replica's lease, and the
 * requests passed to the other replicas (mode "many").
 */
import type { Server } from 'node:http';
import { readFile } from 'node:fs/promises';
import type { Context } from 'koa';
import type pg from 'pg';
import { ConfigError } from '../../config/load.js';
import type { OidcConfig } from '../../config/oidc.js';
import type { Logger } from '../../core/ports.js';
import type { Role } from '../../core/roles.js';
import { OidcSignIn, readClientSecret } from '../../http/oidc.js';
import type { OnOidcSignIn } from '../../web/pages/oidcSignIn.js';
import type { PortalHub } from '../hub/index.js';
import type { FarmJobs } from '../jobs.js';
import { PgFlowStore } from '../oidcFlows.js';
import type { ReplicaLease } from '../replicas/lease.js';
import { Sweeper } from '../replicas/sweeper.js';
import { PgUsers } from '../users.js';
import type { ReplicaProxy } from './replicaProxy.js';

export function sweeperOf(pool: pg.Pool, lease: ReplicaLease, hub: PortalHub, jobs: FarmJobs, logger: Logger): Sweeper {
  return new Sweeper({
    pool,
    replicaId: lease.replicaId,
    periodMs: lease.leaseMs,
    graceMs: hub.restartGraceMs,
    logger: logger.child({ part: 'replica-sweeper' }),
    held: () => lease.held,
    fault: (nodeId, reason, t) => jobs.nodeOffline(nodeId, reason, t),
    onOffline: (nodeId, reason) => hub.emitPortalEvent('node.offline', nodeId, { online: false, reason }),
  });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** The replicas' shared secret (`replicas.secret_file`): at least 32 bytes, its surrounding whitespace dropped. */
export async function readReplicaSecret(file: string): Promise<Buffer> {
  let text: string;
  try {
    text = (await readFile(file, 'utf8')).trim();
  } catch (e) {
    throw new ConfigError([`replicas.secret_file: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)})`]);
  }
  if (Buffer.byteLength(text) < 32) throw new ConfigError([`replicas.secret_file: ${file} holds ${Buffer.byteLength(text)} bytes; at least 32 are needed (e.g. openssl rand -hex 32)`]);
  return Buffer.from(text, 'utf8');
}

/** Sign-in with OpenID Connect, when configured: people are recorded in `users` (PgUsers.signedInWithOidc). */
export async function readOidcSecret(o: OidcConfig): Promise<string> {
  try {
    return await readClientSecret(o);
  } catch (e) {
    throw new ConfigError([(e as Error).message]);
  }
}

export function portalOidc(o: OidcConfig, publicUrl: string | undefined, pool: pg.Pool, clientSecret: string, logger: Logger): { signIn: OidcSignIn; onSignIn: OnOidcSignIn } {
  const users = new PgUsers(pool);
  const providerDecides = o.role_claim !== undefined;
  return {
    // Flows in PostgreSQL: the provider's callback may land on another replica than the start (docs/auth.md).
    signIn: new OidcSignIn(o, { publicUrl, clientSecret, logger, flows: new PgFlowStore(pool) }),
    onSignIn: (who) => users.signedInWithOidc(who.login, who.role, providerDecides, { from: who.from, issuer: o.issuer }),
  };
}

export async function listen(server: Server, listenOn: string): Promise<void> {
  const i = listenOn.lastIndexOf(':');
  const host = listenOn.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(listenOn.slice(i + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Replicas "many": the same request at every other replica with a live lease (routes.ts `atOtherReplicas`), each
 * failure logged. The replicas read now, not cached: a push is rare.
 */
export function atOtherReplicas(pool: pg.Pool, proxy: ReplicaProxy, replicaId: string, logger: Logger) {
  return async (method: string, path: string, caller: { user: string; role?: Role | undefined }): Promise<void> => {
    const { rows } = await pool.query<{ replica_id: string; url: string }>(
      `SELECT replica_id, url FROM portal_replicas WHERE lease_until > now() AND replica_id <> $1`,
      [replicaId],
    );
    await Promise.all(
      rows.map(async (r) => {
        const status = await proxy.call({ replicaId: r.replica_id, url: r.url }, method, path, caller).catch((e: Error) => e.message);
        if (status !== 204 && status !== 200) logger.warn({ replica: r.replica_id, path, answer: status }, 'a request passed to every replica failed at one');
      }),
    );
  };
}

/**
 * Replicas "many": a request any node answers (test_case_names) passed to another replica with a live lease that
 * holds an online node, named as that node's (routes.ts `toAnyNodeElsewhere`); false when there is none.
 */
export function toAnyNodeElsewhere(pool: pg.Pool, proxy: ReplicaProxy, replicaId: string) {
  return async (ctx: Context): Promise<boolean> => {
    const { rows } = await pool.query<{ node_id: string; replica_id: string; url: string }>(
      `SELECT n.node_id, r.replica_id, r.url FROM nodes n JOIN portal_replicas r ON r.replica_id = n.owner_replica
        WHERE n.online AND r.replica_id <> $1 AND r.lease_until > now() ORDER BY random() LIMIT 1`,
      [replicaId],
    );
    const row = rows[0];
    if (!row) return false;
    await proxy.pass(ctx, row.node_id, { replicaId: row.replica_id, url: row.url });
    return true;
  };
}
