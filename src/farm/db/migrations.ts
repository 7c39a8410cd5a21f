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
];
