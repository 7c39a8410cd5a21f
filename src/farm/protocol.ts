/**
 * The node <-> portal protocol (docs/farm.md, "The node's connection").
 *
 * The node opens it: a WebSocket to `<portal>/farm/v1/connect` with the
 * headers `Authorization: node <credential>` and `X-Farmhand-Node: <node_id>`
 * (a 401/403 upgrade answer means a bad credential: the node logs it and keeps
 * retrying with back-off, since the operator may register it later).
 *
 * Text frames carry one JSON message each (below). Binary frames carry the
 * bytes of one HTTP/2 connection (RFC 9113, Node's node:http2), in order: the
 * portal is its client, the node its server, and every forwarded request is a
 * stream of it (src/farm/h2Tunnel.ts, src/farm/hub/h2Client.ts,
 * src/farm/link/h2Server.ts), with HTTP/2's per-stream flow control and
 * RST_STREAM for a client that goes away.
 */
import type { FarmEvent } from '../core/events.js';
import type { ResultRecord } from '../core/model.js';

/**
 * 2: the node's state is the stream's `node.state` event (no snapshot message, no state in the hello), and the
 * portal may ask for a `resend`.
 * 3: forwarded requests are HTTP/2 streams in the binary frames (the messages req, res, end, cancel, req_end are
 * gone). A node of another protocol is refused at its hello with PROTOCOL_MISMATCH's reason; nodes and portal
 * upgrade together.
 */
export const PROTOCOL_VERSION = 3;
/** The close reason (and log line) of a peer of another protocol version (at most 123 bytes: a close reason). */
export const protocolMismatch = (theirs: unknown): string =>
  `protocol ${PROTOCOL_VERSION} expected, got ${String(theirs).slice(0, 12)}: upgrade the nodes and the portal together`;
/**
 * The portal's user and base URL on a forwarded request (an HTTP/2 stream's headers); the node makes them its own
 * delegate headers (src/farm/link/forwardHeaders.ts) and never passes these on.
 */
export const FORWARD_USER_HEADER = 'farmhand-user';
export const FORWARD_BASE_URL_HEADER = 'farmhand-base-url';
export const CONNECT_PATH = '/farm/v1/connect';
/** The heartbeat interval the portal asks for unless configured otherwise. */
export const DEFAULT_HEARTBEAT_SECS = 5;
/** A node that misses this many heartbeat intervals is offline. */
export const MISSED_HEARTBEATS_OFFLINE = 3;
/**
 * The longest a node waits between two attempts to connect (the cap of its jittered back-off,
 * link/backoff.ts). A portal that restarts waits this long, plus MISSED_HEARTBEATS_OFFLINE intervals, for a
 * node that had a running job before it applies the fault rule (hub/liveness.ts): a node that lived through
 * the portal's absence is back by then, whatever its back-off had grown to.
 */
export const RECONNECT_CAP_MS = 30_000;

// ---- node -> portal ----------------------------------------------------------------------------

/**
 * The node says who it is. Its state (Node object, availability) is not in it: it is the stream's `node.state`
 * event, which the portal has already folded or gets in the replay after the welcome (docs/farm.md, "The node's
 * state").
 */
export interface Hello {
  t: 'hello';
  protocol: number;
  node_id: string;
  version: string;
  /** The node's current job, or its last one (job_uid and status), so the portal can reconcile. */
  job: { job_uid: string; status: 'running' | 'exited' } | null;
}

/**
 * Who the node's tests run as (docs/security.md), in its state: the Node object of its `node.state` carries it under
 * TEST_USER_KEY (src/daemon/portalLink.ts), so the portal keeps it as it keeps the rest of the state (the nodes
 * table, every replica) and its page of the node warns when a test can read the node's credential. Not part of
 * the API's Node object: the portal takes it out (src/farm/portal/nodeViews.ts). Absent from a node of an older
 * version.
 */
export const TEST_USER_KEY = 'farm_test_user';
export interface NodeTestUser {
  /** The user tests run as; null: the daemon's own. */
  run_as: string | null;
  /** Whether a test can read the node's credential (tests run as the daemon's own user). */
  can_read_credential: boolean;
}

/** A node's NodeTestUser as its state carries it; undefined when it carries none (an older node) or not that shape. */
export function nodeTestUserOf(snapshot: Record<string, unknown> | null | undefined): NodeTestUser | undefined {
  const t = snapshot?.[TEST_USER_KEY] as Partial<NodeTestUser> | null | undefined;
  if (typeof t !== 'object' || t === null || typeof t.can_read_credential !== 'boolean') return undefined;
  return { run_as: typeof t.run_as === 'string' ? t.run_as : null, can_read_credential: t.can_read_credential };
}

export interface Heartbeat {
  t: 'hb';
}

/**
 * An event the node published on its own event hub (its journal), passed on as is, in the journal's order
 * (docs/farm.md, "The node stream"). A `run.finished` also carries the whole result record, beside the event.
 */
export interface NodeEventMessage {
  t: 'event';
  event: FarmEvent;
  /** With `run.finished`: the node's record of the run (absent from a node of the previous version). */
  record?: ResultRecord;
}

/**
 * The node's answer to `resend`: the events after `after` follow this marker, from the node's journal, then its live
 * events. The portal takes none of the node's events between its `resend` and this marker (they are in the replay).
 */
export interface ReplayMarker {
  t: 'replay';
  after: string | null;
}

// ---- portal -> node ----------------------------------------------------------------------------

export interface Welcome {
  t: 'welcome';
  protocol: number;
  heartbeat_secs: number;
  /**
   * Jobs of this node the portal has already ended (it marked the node offline and closed them):
   * the node stops any of them still running, and never reports them as running again.
   */
  ended_jobs: string[];
  /**
   * The last of this node's own events the portal has recorded in its outbox (or dropped on purpose, as the late
   * event of a job it ended), by the node's event id (`<boot>-<n>`); null when it has recorded none. The node
   * passes on its events after this one, from its buffer: an event sent in the instant the portal died is sent
   * again, and the portal stores a node event once (docs/farm.md, "The outbox"). Absent from an older portal:
   * the node then resumes after the last event it handed to the socket.
   */
  last_event_id?: string | null;
}

/** The node's events up to this one (its id) are folded into the portal's tables, in a committed transaction. */
export interface Ack {
  t: 'ack';
  last_event_id: string;
}

/**
 * The portal held as many of the node's events as it will (the database is away: docs/farm.md, "The portal's
 * inbox") and took none after `after`: the node sends `replay` and its events after `after` again, from its journal.
 */
export interface Resend {
  t: 'resend';
  after: string | null;
}

export type NodeMessage = Hello | Heartbeat | NodeEventMessage | ReplayMarker;
export type PortalMessage = Welcome | Ack | Resend;

/**
 * Where a node's own event stands among that node's events: [boot, n] of its id `<boot>-<n>` (boot is the
 * start instant of the node's event hub in ms, base 36, so a later start is a larger boot; n counts from 1).
 * Compared element by element. Null for an id of another form.
 */
export function nodeEventOrder(id: string): [number, number] | null {
  const m = /^([0-9a-z]{1,12})-([1-9][0-9]{0,15})$/.exec(id);
  if (!m) return null;
  const boot = parseInt(m[1]!, 36);
  const n = Number(m[2]);
  return Number.isSafeInteger(boot) && Number.isSafeInteger(n) ? [boot, n] : null;
}

/**
 * The headers of a forwarded request that name the acting user and the portal, and say whether the reader is
 * signed in: read by the node's HTTP layer (src/http/auth.ts), so they are defined there (src/http/delegateHeaders.ts)
 * and the HTTP layer imports nothing of the farm's.
 */
export { BASE_URL_HEADER, DELEGATE_HEADER, ON_BEHALF_HEADER, SIGNED_IN_HEADER } from '../http/delegateHeaders.js';

/**
 * The close code of a connection replaced by a newer one of the same node id (the node restarted,
 * or a second node uses the same id and credential). A node whose CURRENT connection is closed with
 * it is not the newest: it stops reconnecting instead of taking the id back (docs/farm.md, "Faults").
 */
export const CLOSE_REPLACED = 4000;

