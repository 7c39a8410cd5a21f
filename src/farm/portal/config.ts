/**
 * The portal's configuration (`farmhand portal --config <file>`): one JSON
 * file, validated at start with every problem listed (`path: message`), as the
 * node's is (src/config/load.ts). Only `database` and `storage_dir` have no
 * default. `auth`, `events`, `webhooks`, `rate_limit`, `api` and `log_level` take the
 * node's schema, so the two processes read the same keys the same way.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { configSchema } from '../../config/schema.js';
import { ConfigError } from '../../config/load.js';
import { DEFAULT_HEARTBEAT_SECS } from '../protocol.js';

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:8080')
  .refine((s) => Number(s.slice(s.lastIndexOf(':') + 1)) <= 65535, 'the port must be 0 to 65535');

const node = configSchema.shape;

export const portalConfigSchema = z.strictObject({
  /** Where the portal's HTTP API (and the nodes' connections) listen. */
  listen: hostPort.default('0.0.0.0:8080'),
  /** Absolute base URL for job_url, result_url...; default: each request's Host header. */
  public_url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
  /** A libpq connection string, e.g. `postgresql:///farm?host=/run/postgresql`. */
  database: z.string().min(1, 'a libpq connection string, e.g. postgresql:///farm?host=/run/postgresql'),
  /** Where uploaded result files are kept. */
  storage_dir: z.string().min(1),
  /** The heartbeat interval nodes are told in their welcome; a node missing 3 of them is offline. */
  heartbeat_secs: z.number().positive().max(3600).default(DEFAULT_HEARTBEAT_SECS),
  /**
   * After the portal starts, how long a node that had a running job has to connect before the fault rule ends its
   * job. Default: the nodes' longest reconnect wait (30 s) plus 3 heartbeats. Tests shorten it.
   */
  restart_grace_secs: z.number().positive().max(86400).optional(),
  /** How often the nodes' last heartbeat times are written to the database (one UPDATE for all). */
  flush_secs: z.number().positive().max(3600).default(30),
  /** Connections in the pg pool. */
  database_pool_size: z.number().int().min(1).max(1000).default(10),
  /** A database query not answered within this fails (503 database_unavailable); migrations at start are exempt. */
  database_query_timeout_secs: z.number().positive().max(3600).default(30),
  /**
   * What one node's unfinished uploads (partial files) may hold on the portal's storage together; a chunk past it is
   * refused (507). At least the largest file a node uploads (docs/farm.md, "What a node can do to the portal").
   */
  max_partial_upload_bytes_per_node: z.number().int().min(1024 * 1024).default(2 * 1024 ** 3),
  /**
   * How long a Job answered as exited through the portal is held, at most, for its results to reach the farm's
   * index (docs/farm.md, "Read your writes through the portal"); then it is answered anyway.
   */
  read_your_writes_max_secs: z.number().positive().max(3600).default(30),
  /**
   * Retired with protocol 3 (docs/farm.md, "Forwarded requests: HTTP/2 over the WebSocket"): each forwarded answer's
   * HTTP/2 window bounds what waits for a slow client. Still accepted so an older config loads; ignored, with a warning.
   */
  max_buffered_response_bytes: z.unknown().optional(),
  /**
   * A node's events held in memory while they wait to be folded (the database is away), at most; past it the portal
   * takes no more of that node's events until those are folded, then asks for the rest (docs/farm.md, "The portal's inbox").
   */
  max_node_inbox_events: z.number().int().min(1).default(5000),
  /** ... and their bytes (as sent) at most. */
  max_node_inbox_bytes: z.number().int().min(64 * 1024).default(32 * 1024 * 1024),
  /** What the portal keeps of the uploaded results: the node's keys, the same meaning (docs/farm.md). */
  retention: z
    .strictObject({
      max_results: z.number().int().positive().default(10_000_000),
      min_free_mb: z.number().nonnegative().default(1024),
      /** How often retention runs (also once at start). */
      interval_secs: z.number().positive().max(86400).default(600),
    })
    .prefault({}),
  /** The node's key: `auth.v1_requires_token` makes the portal's pages, `/app/events` and v1 reads need a token or a session. */
  auth: node.auth,
  /** The node's key: sign-in with OpenID Connect (docs/auth.md); people are recorded in `users`. */
  oidc: node.oidc,
  api: node.api,
  rate_limit: node.rate_limit,
  events: node.events,
  webhooks: node.webhooks,
  /** The farm's audit trail in PostgreSQL (docs/auth.md, "Audit trail"): the node's keys, the same meaning. */
  audit: node.audit,
  log_level: node.log_level,
  /**
   * One portal per database, or many replicas of it on one database (docs/farm.md, "Many portals"). "single"
   * (default): the portal lock, a second portal refuses to start. "many": no lock; each process holds a lease in
   * `portal_replicas` and writes about a node only while it owns it at the epoch it took at the node's hello.
   */
  replicas: z
    .strictObject({
      mode: z.enum(['single', 'many']).default('single'),
      /** This replica's id in `portal_replicas` and `nodes.owner_replica`; default: a random id per process start. */
      replica_id: z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, ".", "_" and "-", at most 63, e.g. p1')
        .optional(),
      /** Where the OTHER replicas reach this one (a request for a node connected here is passed on to it). */
      advertise_url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
      /** A file holding the secret every replica shares: it authenticates requests between replicas. */
      secret_file: z.string().min(1).optional(),
      /** The lease's length; renewed every lease_secs/3. A replica that cannot renew within it stops acting. */
      lease_secs: z.number().min(0.3).max(600).default(10),
      /**
       * How long a request for a node between owners (its owner stopping, the node reconnecting elsewhere) is held
       * for the node's next owner before it is answered 503 with Retry-After; 0 answers at once.
       */
      hold_secs: z.number().min(0).max(120).default(10),
    })
    .prefault({})
    .superRefine((r, ctx) => {
      if (r.mode !== 'many') return;
      if (r.advertise_url === undefined) ctx.addIssue({ code: 'custom', path: ['advertise_url'], message: 'required with mode "many": where the other replicas reach this one, e.g. http://10.0.0.5:8080' });
      if (r.secret_file === undefined) ctx.addIssue({ code: 'custom', path: ['secret_file'], message: 'required with mode "many": a file with the secret all replicas share' });
    }),
});

export type PortalConfig = z.infer<typeof portalConfigSchema>;
export type PortalConfigInput = z.input<typeof portalConfigSchema>;

/** Validate an object (tests build one in memory); throws ConfigError listing every problem. */
export function parsePortalConfig(raw: unknown, baseDir = process.cwd()): PortalConfig {
  const parsed = portalConfigSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`));
  }
  // A relative storage_dir (and secret_file) is relative to the config file, as the node's data_dir is.
  const r = parsed.data.replicas;
  return {
    ...parsed.data,
    storage_dir: path.resolve(baseDir, parsed.data.storage_dir),
    replicas: { ...r, ...(r.secret_file !== undefined && { secret_file: path.resolve(baseDir, r.secret_file) }) },
  };
}

/** Read and validate the file; throws ConfigError listing every problem. */
export function loadPortalConfig(file: string): PortalConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError([`${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ConfigError([`${file}: not valid JSON (${(e as Error).message})`]);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError([`${file}: must be a JSON object`]);
  return parsePortalConfig(raw, path.dirname(path.resolve(file)));
}
