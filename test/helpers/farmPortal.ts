/**
 * A real portal (startPortal) on loopback against a throwaway PostgreSQL, with
 * in-test implementations of the seams other pieces fill at merge: node
 * credentials and v2 tokens kept in maps (hB's PgNodeCredentials and
 * PgTokenVerifier replace them), and optionally reservations (hC's).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { formatToken, type TokenVerifier } from '../../src/core/auth.js';
import type { FarmReservations, NodeCredentials } from '../../src/farm/contract.js';
import { parsePortalConfig, type PortalConfigInput } from '../../src/farm/portal/config.js';
import { startPortal, type Portal } from '../../src/farm/portal/portal.js';
import type { TestPostgres } from './postgres.js';
import { capturingLogger, type CapturingLogger } from './logger.js';

export const connectionString = (c: TestPostgres) =>
  `postgresql://${encodeURIComponent(c.user)}@/${c.database}?host=${encodeURIComponent(c.host)}&port=${c.port}`;

export interface TestPortal {
  portal: Portal;
  logger: CapturingLogger;
  /** Register a node (a nodes row) and return its credential. */
  registerNode(nodeId: string): Promise<string>;
  /** A v2 token for this user. */
  tokenFor(user: string): string;
  stop(): Promise<void>;
}

export async function startTestPortal(
  cluster: TestPostgres,
  cfg: Partial<PortalConfigInput> = {},
  extra: { reservations?: FarmReservations } = {},
): Promise<TestPortal> {
  const creds = new Map<string, string>();
  const tokens = new Map<string, string>();
  const credentials: NodeCredentials = { verify: (id, c) => Promise.resolve(creds.get(id) === c) };
  const verifier: TokenVerifier = {
    verify: (t) => {
      const user = tokens.get(t);
      return user === undefined ? undefined : { user, tokenId: t.slice(3, 11) };
    },
    verifyId: (id) => {
      const t = [...tokens.keys()].find((k) => k.slice(3, 11) === id);
      return t === undefined ? undefined : { user: tokens.get(t)!, tokenId: id };
    },
  };
  const input = {
    listen: '127.0.0.1:0',
    database: connectionString(cluster),
    storage_dir: 'farm-storage',
    log_level: 'silent',
    rate_limit: { requests_per_second: 1000, burst: 10000 },
    ...cfg,
  } as PortalConfigInput;
  const logger = capturingLogger();
  const parts = {
    tokens: () => verifier,
    credentials: () => credentials,
    ...(extra.reservations && { reservations: () => extra.reservations! }),
  };
  // FARMHAND_TEST_THROUGH_REPLICAS=n (docs/testing.md, "The farm suite through replicas"): n replicas behind HAProxy,
  // sharing these credentials, tokens and logger; "the portal" is r1 (it holds the nodes) at HAProxy's URL.
  const n = Number(process.env.FARMHAND_TEST_THROUGH_REPLICAS ?? 0) || 0;
  const set =
    n > 0 && cfg.replicas === undefined && cfg.listen === undefined
      ? await (await import('./replicaFarm.js')).startReplicaSet(n, (_name, fields) => startPortal(parsePortalConfig({ ...input, ...fields }), logger, parts))
      : undefined;
  const portal = set ? (await import('./replicaFarm.js')).behindHaproxy(set.replicas[0]!, set.url) : await startPortal(parsePortalConfig(input), logger, parts);
  const admin = new pg.Pool({ connectionString: connectionString(cluster), max: 1 });
  return {
    portal,
    logger,
    async registerNode(nodeId) {
      await admin.query('INSERT INTO nodes (node_id) VALUES ($1) ON CONFLICT DO NOTHING', [nodeId]);
      const c = randomBytes(24).toString('base64url');
      creds.set(nodeId, c);
      return c;
    },
    tokenFor(user) {
      const t = formatToken(randomBytes(4).toString('hex'), randomBytes(32).toString('base64url').slice(0, 43));
      tokens.set(t, user);
      return t;
    },
    async stop() {
      if (set) await set.stop();
      else await portal.stop();
      await admin.end();
    },
  };
}
