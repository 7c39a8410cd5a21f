/**
 * The farm's schema, as numbered migrations. Each is plain SQL, applied once,
 * in order, by migrate.ts. Never edit a migration that has shipped: add the
 * next number. They live in TypeScript (not .sql files) so the build carries
 * them into dist/ with no copy step.
 *
 * Text that is compared or sorted is `COLLATE "C"`: byte order of UTF-8, which
 * is code point order, as the single node's in-memory index compares strings,
 * whatever locale the cluster was created with.
 */
export interface Migration { id: number; name: string; sql: string }

export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'farm tables and the results index',
    sql: `
-- Nodes: registration, version, liveness. last_seen is written by batched heartbeat flushes, not per ping.
CREATE TABLE nodes (
  node_id          text COLLATE "C" PRIMARY KEY,
  credential_hash  text,
  version          text,
  registered_at    timestamptz NOT NULL DEFAULT now(),
  last_seen        timestamptz,
  online           boolean NOT NULL DEFAULT false,
  offline_reason   text
);

-- Users and the hashes of their tokens (never the tokens).
CREATE TABLE users (
  username    text COLLATE "C" PRIMARY KEY,
  role        text NOT NULL DEFAULT 'user',
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE tokens (
  token_hash  text PRIMARY KEY,
  username    text COLLATE "C" NOT NULL REFERENCES users ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz,
  revoked_at  timestamptz
);

-- Reservations: one row per reservation, one per node held. Times are the database clock's.
CREATE TABLE reservations (
  reservation_id  bigserial PRIMARY KEY,
  username        text COLLATE "C" NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz,
  lease_secs      integer,
  lease_until     timestamptz,
  ended_at        timestamptz,
  end_reason      text
);
CREATE TABLE reservation_nodes (
  reservation_id  bigint NOT NULL REFERENCES reservations ON DELETE CASCADE,
  node_id         text COLLATE "C" NOT NULL REFERENCES nodes,
  active          boolean NOT NULL DEFAULT true,
  PRIMARY KEY (reservation_id, node_id)
);
-- At most one live reservation per node: the database refuses a double booking.
CREATE UNIQUE INDEX reservation_nodes_one_active ON reservation_nodes (node_id) WHERE active;

-- Jobs: the job_uid starts with its node id (/<node>/<hex>/<number>).
CREATE TABLE jobs (
  job_uid     text COLLATE "C" PRIMARY KEY,
  node_id     text COLLATE "C" NOT NULL REFERENCES nodes,
  username    text COLLATE "C" NOT NULL,
  state       text NOT NULL,
  request     jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  ended_at    timestamptz
);
CREATE INDEX jobs_node ON jobs (node_id, created_at);

-- Events outbox: written in the transaction that changes state; LISTEN/NOTIFY only wakes readers.
CREATE TABLE events_outbox (
  seq      bigserial PRIMARY KEY,
  at       timestamptz NOT NULL DEFAULT now(),
  type     text NOT NULL,
  node_id  text COLLATE "C",
  data     jsonb NOT NULL
);

-- The results index of the whole farm: every field of a stored result record (ResultRecord,
-- src/core/model.ts), plus columns derived at insert for filtering and sorting.
CREATE TYPE outcome AS ENUM ('pass', 'fail', 'error');  -- declared in sort rank order
CREATE TABLE results (
  result_id         text COLLATE "C" PRIMARY KEY,  -- <job_uid>/<YYYY-MM-DD>_<hh.mm.ss>
  node_id           text COLLATE "C" NOT NULL,     -- first segment of job_uid (derived)
  job_uid           text COLLATE "C" NOT NULL,
  job_number        double precision,              -- last segment of job_uid, for sort=job (derived)
  test_case         text COLLATE "C" NOT NULL,
  test_pack_sha     text NOT NULL,
  test_pack_branch  text,
  category          text COLLATE "C" NOT NULL,
  username          text NOT NULL,
  tags              jsonb NOT NULL DEFAULT '{}',
  start_time        timestamptz NOT NULL,
  end_time          timestamptz NOT NULL,
  duration          double precision NOT NULL,
  result            outcome NOT NULL,
  failure_reason    text,
  traceback         text,
  infrastructure_error text,  -- the kind of an infrastructure fault (docs/health-checks.md), else NULL
  -- test_case, failure_reason, category, result_id lower-cased by the same code as the in-memory
  -- index, joined by U+001F: free-text terms are one LIKE on it (derived).
  search            text COLLATE "C" NOT NULL
);
-- The common filters, each ending in the date order so a date sort with a limit walks the index.
CREATE INDEX results_date ON results (start_time, result_id);
CREATE INDEX results_testcase_result ON results (test_case, result, start_time, result_id);
CREATE INDEX results_job ON results (job_uid, start_time, result_id);
CREATE INDEX results_category ON results (category, start_time, result_id);
CREATE INDEX results_result ON results (result, start_time, result_id);
CREATE INDEX results_node ON results (node_id, start_time, result_id);
`,
  },
  {
    id: 2,
    name: 'jobs kept from node events: the last Job, the run in flight, why the portal ended it',
    sql: `
-- The Job object as last known (status, start_time, end_time, result_counts), so GET /api/v2/jobs/<uid>
-- is answered from here while the node is offline.
ALTER TABLE jobs ADD COLUMN job jsonb;
-- The run in flight (run.started's result_id, test_case, start_time), null between runs: what the
-- fault rule records as an error when the node goes offline.
ALTER TABLE jobs ADD COLUMN current_run jsonb;
-- Set when the portal ended the job itself (its node went offline): such a job is never reopened.
ALTER TABLE jobs ADD COLUMN end_reason text;
CREATE INDEX jobs_node_running ON jobs (node_id) WHERE state = 'running';
`,
  },
  {
    id: 3,
    name: 'identity: token ids, change notifications for tokens, users and node credentials',
    sql: `
-- A token's public id (the 8 hex digits of fh_<id>_<secret>): listed, used to revoke. Rows made before
-- this migration (none are expected: nothing wrote tokens) get an id derived from their hash.
ALTER TABLE tokens ADD COLUMN token_id text COLLATE "C";
UPDATE tokens SET token_id = substr(md5(token_hash), 1, 8) WHERE token_id IS NULL;
ALTER TABLE tokens ALTER COLUMN token_id SET NOT NULL;
ALTER TABLE tokens ADD CONSTRAINT tokens_token_id_key UNIQUE (token_id);
ALTER TABLE tokens ADD CONSTRAINT tokens_token_id_format CHECK (token_id ~ '^[0-9a-f]{8}$');

-- Portals keep the tokens in memory (PgTokenVerifier): any change to tokens or users wakes them to
-- reload. Statement-level, so a bulk change is one notification; the payload is empty on purpose
-- (the listener reloads the whole table, which is small).
CREATE FUNCTION farm_identity_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('farm_tokens', '');
  RETURN NULL;
END $$;
CREATE TRIGGER tokens_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tokens
  FOR EACH STATEMENT EXECUTE FUNCTION farm_identity_notify();
CREATE TRIGGER users_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION farm_identity_notify();

-- A node re-keyed or removed: the hub may drop that node's connection (payload: the node id).
-- Only credential changes notify, never the heartbeat flushes that update last_seen.
CREATE FUNCTION farm_node_credential_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('farm_node_credentials', coalesce(NEW.node_id, OLD.node_id));
  RETURN NULL;
END $$;
CREATE TRIGGER nodes_credential_notify AFTER INSERT OR DELETE OR UPDATE OF credential_hash ON nodes
  FOR EACH ROW EXECUTE FUNCTION farm_node_credential_notify();
`,
  },
  {
    id: 4,
    name: 'reservations: one row per node, message, how they ended, lease renewal groups',
    sql: `
-- One reservation holds one node (the spec: one reservation per requested node, each with its own id);
-- reservation_nodes keeps its single row per reservation, where the partial unique index refuses a
-- double booking. group_id ties the reservations made by one request together (a lease is renewed
-- for the whole group).
CREATE SEQUENCE reservation_groups;
ALTER TABLE reservations
  ADD COLUMN group_id bigint NOT NULL DEFAULT nextval('reservation_groups'),
  ADD COLUMN message text NOT NULL DEFAULT '',
  ADD COLUMN ended_by text COLLATE "C",
  ADD COLUMN end_message text,
  -- Interrupted by someone else and not yet shown to the owner (told once, as on a single node).
  ADD COLUMN notice_pending boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT reservations_end_reason CHECK (end_reason IN ('ended', 'expired', 'interrupted')),
  ADD CONSTRAINT reservations_lease CHECK ((lease_secs IS NULL) = (lease_until IS NULL));
ALTER TABLE reservation_nodes ADD CONSTRAINT reservation_nodes_one_node UNIQUE (reservation_id);
-- The sweeper looks for live reservations past their expiry or lease.
CREATE INDEX reservations_live ON reservations (reservation_id) WHERE ended_at IS NULL;
CREATE INDEX reservations_group ON reservations (group_id);
CREATE INDEX reservations_notice ON reservations (username) WHERE notice_pending;
`,
  },
  {
    id: 5,
    name: 'deleted results (the portal answers 410 for them, as a node does)',
    sql: `
-- Results the portal deleted (retention): their ids answer 410 gone, as a node's tombstones do.
-- A later upload of the same id removes its row.
CREATE TABLE results_deleted (
  result_id   text COLLATE "C" PRIMARY KEY,
  node_id     text COLLATE "C" NOT NULL,
  deleted_at  timestamptz NOT NULL DEFAULT now()
);
`,
  },
  {
    id: 6,
    name: 'events outbox: relayed events, pruning watermark, readers\' cursors',
    sql: `
-- data as json (not jsonb): the text is kept as written, so an event's keys reach clients in the
-- node's order (node_id first), as on a single node's stream.
ALTER TABLE events_outbox ALTER COLUMN data TYPE json USING data::json;
-- When the event happened (a node's publication time for relayed events); NULL: at. at stays the
-- portal's insert time, which retention goes by.
ALTER TABLE events_outbox ADD COLUMN time timestamptz;
-- The node's own event id (<boot>-<n>) of a relayed event: a node event sent twice is stored once.
ALTER TABLE events_outbox ADD COLUMN node_event_id text COLLATE "C";
CREATE UNIQUE INDEX events_outbox_node_event ON events_outbox (node_id, node_event_id) WHERE node_event_id IS NOT NULL;
CREATE INDEX events_outbox_at ON events_outbox (at);
-- The highest seq retention has deleted: a client resuming from an id below it missed events.
CREATE TABLE events_outbox_pruned (
  one      boolean PRIMARY KEY DEFAULT true CHECK (one),
  through  bigint NOT NULL DEFAULT 0
);
INSERT INTO events_outbox_pruned DEFAULT VALUES;
-- Where a reader that must survive restarts (the webhooks) has got to: every event up to seq is done.
CREATE TABLE events_cursors (
  name        text COLLATE "C" PRIMARY KEY,
  seq         bigint NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
`,
  },
  {
    id: 7,
    name: 'node events delivered at least once: each node\'s cursor, the last node event applied to a job',
    sql: `
-- Per node, the last of its own events the portal has recorded in the outbox (or dropped on purpose), written in
-- the transaction that stores the event. The welcome tells the node this id; the node sends every event after it
-- again, and the unique key (node_id, node_event_id) of events_outbox stores each once. boot and n order the
-- node's ids (<boot>-<n>, boot the node hub's start instant in base 36).
CREATE TABLE node_event_cursors (
  node_id     text COLLATE "C" PRIMARY KEY,
  boot        bigint NOT NULL,
  n           bigint NOT NULL,
  event_id    text COLLATE "C" NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
-- The last node event ({boot, n}) applied to a job row: an event sent again (it was applied, but not yet in the
-- outbox when the portal died) changes the row once, so a run.finished is counted once.
ALTER TABLE jobs ADD COLUMN last_node_event bigint[];
`,
  },
  {
    id: 8,
    name: 'roles: users.role is read, manual, run or admin (docs/auth.md, "Roles")',
    sql: `
-- Before roles, every user of a farm could do everything: each existing user (role 'user', the old default)
-- becomes an admin, so no farm loses access by upgrading. Users added from now on get 'run' unless told.
UPDATE users SET role = 'admin' WHERE role NOT IN ('read', 'manual', 'run', 'admin');
ALTER TABLE users ALTER COLUMN role SET DEFAULT 'run';
ALTER TABLE users ADD CONSTRAINT users_role_known CHECK (role IN ('read', 'manual', 'run', 'admin'));
`,
  },
  {
    id: 9,
    name: 'the audit trail',
    sql: `
-- Every state-changing action, with who, when, from where and what (docs/auth.md, "Audit trail"). Written by the
-- portal (src/farm/audit.ts) and by \`farmhand farm\`; read newest first (id) with filters; retention deletes by at.
CREATE TABLE audit (
  id         bigserial PRIMARY KEY,
  at         timestamptz NOT NULL,
  who        text COLLATE "C" NOT NULL,
  via        text NOT NULL,
  token_id   text,
  from_addr  text,
  action     text COLLATE "C" NOT NULL,
  node_id    text COLLATE "C",
  target     text,
  detail     jsonb NOT NULL DEFAULT '{}',
  outcome    integer NOT NULL
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_who ON audit (who, id);
CREATE INDEX audit_node ON audit (node_id, id) WHERE node_id IS NOT NULL;
`,
  },
  {
    id: 10,
    name: 'portal replicas: leases and node ownership with an epoch (docs/farm.md, "Many portals")',
    sql: `
-- Each portal process of a farm run with replicas "many" is a replica: it holds a lease, renewed while it lives. A
-- replica whose lease has lapsed is gone: the others apply the offline and fault rules to its nodes (the sweeper).
-- url is where the other replicas reach it, to pass on a request for a node connected to it.
CREATE TABLE portal_replicas (
  replica_id   text COLLATE "C" PRIMARY KEY,
  url          text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  lease_until  timestamptz NOT NULL
);
-- The replica a node is connected to, and an epoch raised at every change of owner. A replica writes about a node
-- only while it is still the owner at the epoch it took (WHERE owner_replica = $me AND owner_epoch = $epoch): a
-- stale replica cannot mark offline, fault or overwrite a node that moved to another.
ALTER TABLE nodes ADD COLUMN owner_replica text COLLATE "C";
ALTER TABLE nodes ADD COLUMN owner_epoch bigint NOT NULL DEFAULT 0;
CREATE INDEX nodes_owner ON nodes (owner_replica) WHERE owner_replica IS NOT NULL;
`,
  },
  {
    id: 11,
    name: 'many portals: web sessions, upload locks, the farmhand wake-up channel (docs/farm.md, "Many portals")',
    sql: `
-- People's sign-in sessions (src/farm/webSessions.ts), seen by every replica and kept over a restart. Only the
-- sha256 of the session id (the cookie) is stored: a copy of the table signs nobody in. A token's session names its
-- token (token_id; the token itself is never stored) and takes its user's role from it at each use; an OIDC
-- session keeps the role the provider's claims gave at sign-in. No foreign keys: a token's revocation or a user's
-- removal ends the session at its next use (the verifier no longer knows the token), as on a node.
CREATE TABLE web_sessions (
  id_hash      bytea PRIMARY KEY CHECK (length(id_hash) = 32),
  username     text COLLATE "C" NOT NULL,
  origin       text NOT NULL CHECK (origin IN ('token', 'oidc')),
  token_id     text COLLATE "C",
  role         text,
  csrf         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  CHECK ((origin = 'token') = (token_id IS NOT NULL))
);
CREATE INDEX web_sessions_user ON web_sessions (username, last_used_at);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
-- A session that ends (sign-out, expiry, a cap, the prune) is told to every replica at once, so their held
-- connections of it (event streams) end too: a notification on the farmhand channel (src/farm/wakeups.ts).
CREATE FUNCTION web_sessions_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('farmhand', json_build_object('kind', 'session_ended', 'hash', encode(OLD.id_hash, 'hex'))::text);
  RETURN NULL;
END $$;
CREATE TRIGGER web_sessions_ended AFTER DELETE ON web_sessions FOR EACH ROW EXECUTE FUNCTION web_sessions_ended();
-- One operation at a time on each partial upload file, whichever replica receives it (src/farm/uploads.ts): a
-- lease, so a replica that dies holding one does not block the file for ever.
CREATE TABLE upload_locks (
  file_key  text COLLATE "C" PRIMARY KEY,
  holder    text NOT NULL,
  until     timestamptz NOT NULL
);
`,
  },
  {
    id: 12,
    name: 'the node\'s state from its stream (docs/farm.md, "The node\'s state")',
    sql: `
-- The payload of the node's last node.state folded (its v2 Node object and its availability as a kind and a detail),
-- and that event's id: written in the fold's transaction, read when the node is not connected to this portal process.
ALTER TABLE nodes ADD COLUMN state jsonb;
ALTER TABLE nodes ADD COLUMN state_event_id text;
`,
  },
  {
    id: 13,
    name: 'the address a node connects from, for the other replicas (docs/farm.md, "Many portals: the node\'s state on every replica")',
    sql: `
-- Written at the node's hello by the replica that takes it (replicas "many"); the other replicas show it as the Node
-- object's external_ip_address, as the owner does from the connection.
ALTER TABLE nodes ADD COLUMN external_ip text;
`,
  },
  {
    id: 14,
    name: 'many portals: OIDC sign-ins in progress (docs/auth.md, "Sign-in with OpenID Connect", "Many portals")',
    sql: `
-- A sign-in with the identity provider started on one replica and finished on another (src/farm/oidcFlows.ts): its
-- state, nonce, PKCE code_verifier and where to go next, under the sha256 of the flow id the browser's cookie holds
-- (the id itself is not stored: a copy of the table finishes no sign-in). Taken by DELETE ... RETURNING at the
-- callback (used once, whichever replica receives it); rows past expires_at are swept at each start of a sign-in.
CREATE TABLE oidc_flows (
  id_hash      bytea PRIMARY KEY CHECK (length(id_hash) = 32),
  state        text NOT NULL,
  nonce        text NOT NULL,
  verifier     text NOT NULL,
  next         text NOT NULL,
  redirect_uri text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL
);
CREATE INDEX oidc_flows_expiry ON oidc_flows (expires_at);
`,
  },
  {
    id: 15,
    name: 'node labels and the job queue (docs/queue.md)',
    sql: `
-- A node's labels (device=roku-ultra, room=lab2): set by the farm's administrator (farmhand farm node label), never
-- taken from the node. A queued job's selector matches a node that has all of its labels.
CREATE TABLE node_labels (
  node_id  text COLLATE "C" NOT NULL REFERENCES nodes ON DELETE CASCADE,
  key      text COLLATE "C" NOT NULL,
  value    text COLLATE "C" NOT NULL,
  PRIMARY KEY (node_id, key)
);
CREATE INDEX node_labels_pair ON node_labels (key, value);
-- The queue (src/farm/queue/store.ts): a job waits in state queued until a dispatcher claims it (SELECT ... FOR
-- UPDATE SKIP LOCKED in the transaction that starts it on a node), then started (its job_uid), or it ends
-- cancelled, expired (queue_timeout_secs) or failed (the node refused the request itself).
CREATE TABLE queue_jobs (
  queue_id            bigserial PRIMARY KEY,
  username            text COLLATE "C" NOT NULL,
  labels              jsonb NOT NULL,
  selector            text COLLATE "C" NOT NULL,
  priority            smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
  request             jsonb NOT NULL,
  queue_timeout_secs  integer CHECK (queue_timeout_secs > 0),
  queued_at           timestamptz NOT NULL DEFAULT now(),
  expires_at          timestamptz,
  state               text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'started', 'cancelled', 'expired', 'failed')),
  node_id             text COLLATE "C",
  job_uid             text COLLATE "C",
  attempts            integer NOT NULL DEFAULT 0,
  last_error          text,
  ended_at            timestamptz,
  end_reason          text,
  ended_by            text COLLATE "C"
);
-- The order the dispatchers read waiting jobs in: highest priority, then oldest.
CREATE INDEX queue_jobs_waiting ON queue_jobs (priority DESC, queued_at, queue_id) WHERE state = 'queued';
CREATE INDEX queue_jobs_expiry ON queue_jobs (expires_at) WHERE state = 'queued' AND expires_at IS NOT NULL;
CREATE INDEX queue_jobs_selector ON queue_jobs (selector, queue_id);
CREATE INDEX queue_jobs_job ON queue_jobs (job_uid) WHERE job_uid IS NOT NULL;
-- A job queued wakes every replica's dispatcher at its commit (src/farm/wakeups.ts, kind queue_job).
CREATE FUNCTION queue_jobs_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('farmhand', json_build_object('kind', 'queue_job')::text);
  RETURN NULL;
END $$;
CREATE TRIGGER queue_jobs_queued AFTER INSERT ON queue_jobs FOR EACH STATEMENT EXECUTE FUNCTION queue_jobs_queued();
`,
  },
  {
    id: 16,
    name: "pools' health checks and maintenance (docs/health-checks.md, \"A pool's health check\")",
    sql: `
-- A pool's health check (farmhand farm pool health-check): the test case run on each node with all of the pool's
-- labels when it comes back online and every every_hours (0: only when it comes back). A node in several pools with a
-- check takes the check of the pool with the most labels (then the first selector in order).
CREATE TABLE pool_health_checks (
  selector     text COLLATE "C" PRIMARY KEY,
  labels       jsonb NOT NULL,
  test_case    text NOT NULL,
  revision     text NOT NULL DEFAULT 'HEAD',
  every_hours  double precision NOT NULL CHECK (every_hours >= 0 AND every_hours <= 8760),
  set_by       text COLLATE "C" NOT NULL,
  set_at       timestamptz NOT NULL DEFAULT now()
);
-- Each check run on a node (src/farm/queue/health.ts): started in the transaction that asked the node for the job
-- (job_uid), ended with the job's result. At most one in progress per node.
CREATE TABLE node_health_checks (
  check_id    bigserial PRIMARY KEY,
  node_id     text COLLATE "C" NOT NULL REFERENCES nodes ON DELETE CASCADE,
  selector    text COLLATE "C" NOT NULL,
  test_case   text NOT NULL,
  job_uid     text COLLATE "C",
  started_at  timestamptz NOT NULL DEFAULT now(),
  ended_at    timestamptz,
  outcome     text CHECK (outcome IN ('pass', 'fail', 'error', 'not_started')),
  result_id   text COLLATE "C",
  reason      text
);
CREATE UNIQUE INDEX node_health_checks_running ON node_health_checks (node_id) WHERE ended_at IS NULL;
CREATE INDEX node_health_checks_node ON node_health_checks (node_id, check_id);
-- A node's health as its last check (or an administrator: farmhand farm node healthy) left it. since: the start of
-- the check that decided it, or when the administrator put it back. No row: never checked.
CREATE TABLE node_health (
  node_id    text COLLATE "C" PRIMARY KEY REFERENCES nodes ON DELETE CASCADE,
  state      text NOT NULL CHECK (state IN ('healthy', 'unhealthy')),
  check_id   bigint,
  selector   text COLLATE "C",
  test_case  text,
  result_id  text COLLATE "C",
  reason     text,
  since      timestamptz NOT NULL DEFAULT now(),
  set_by     text COLLATE "C" NOT NULL
);
-- A pool in maintenance (farmhand farm pool maintenance): each node with all of its labels is put in maintenance
-- through the node's own maintenance (the portal forwards POST /api/v2/nodes/<id>/maintenance), and taken out at the end.
CREATE TABLE pool_maintenance (
  selector  text COLLATE "C" PRIMARY KEY,
  labels    jsonb NOT NULL,
  reason    text NOT NULL,
  set_by    text COLLATE "C" NOT NULL,
  since     timestamptz NOT NULL DEFAULT now()
);
-- Every replica hears of a change at once (src/farm/wakeups.ts, kinds pool_maintenance and node_health).
CREATE FUNCTION pools_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('farmhand', json_build_object('kind', TG_ARGV[0])::text);
  RETURN NULL;
END $$;
CREATE TRIGGER pool_maintenance_changed AFTER INSERT OR UPDATE OR DELETE ON pool_maintenance FOR EACH STATEMENT EXECUTE FUNCTION pools_changed('pool_maintenance');
CREATE TRIGGER node_health_changed AFTER INSERT OR UPDATE OR DELETE ON node_health FOR EACH STATEMENT EXECUTE FUNCTION pools_changed('node_health');
CREATE TRIGGER pool_health_checks_changed AFTER INSERT OR UPDATE OR DELETE ON pool_health_checks FOR EACH STATEMENT EXECUTE FUNCTION pools_changed('node_health');
`,
  },
  {
    id: 17,
    name: 'a queued job being started is pinned to its node with a key (docs/queue.md, "Dispatching, exactly once")',
    sql: `
-- A start's intent, committed before the node is asked: the node (node_id), the Idempotency-Key sent with the
-- run_tests (start_key) and when (start_at, the database clock). The job stays queued and pinned to that node until
-- the node's answer is recorded; a start whose answer was lost is sent again to the same node with the same key,
-- and the node answers the job it started instead of starting another.
ALTER TABLE queue_jobs ADD COLUMN start_key uuid, ADD COLUMN start_at timestamptz;
-- At most one job being started per node.
CREATE UNIQUE INDEX queue_jobs_starting ON queue_jobs (node_id) WHERE state = 'queued' AND start_key IS NOT NULL;
`,
  },
];
