/**
 * The portal's side of the nodes' connections, the hub's table of nodes (docs/farm.md, "Connections and
 * liveness"): per node its NodeLink as the portal sees it, its current connection (Conn, with the HTTP/2
 * session of its forwarded requests), its in-memory last_seen, and its database work, run in order on one promise chain,
 * so a node that comes back is answered only after its going-away was recorded. The other files of
 * src/farm/hub/ share this table; it imports none of them.
 */
import type { WebSocket } from 'ws';
import { WsTunnel } from '../h2Tunnel.js';
import type { H2LinkClient } from './h2Client.js';
import type { Logger } from '../../core/ports.js';
import type { NodeLink } from '../contract.js';
import { isDatabaseUnavailable } from '../db/pool.js';
import type { StreamItem } from '../fold.js';
import type { Hello, PortalMessage } from '../protocol.js';
import type { Tenure } from '../replicas/ownership.js';
import { CLOSE_MOVED } from './options.js';

/** One WebSocket of a node. */
export class Conn {
  hello: Hello | undefined;
  /** The HTTP/2 byte stream in the socket's binary frames (src/farm/h2Tunnel.ts), from the upgrade. */
  readonly tunnel: WsTunnel;
  /** The HTTP/2 session of the forwarded requests (h2Client.ts), from the hello. */
  h2?: { client: H2LinkClient };
  constructor(
    readonly ws: WebSocket,
    readonly nodeId: string,
    readonly ip: string | null,
  ) {
    this.tunnel = new WsTunnel(ws);
  }

  send(m: PortalMessage): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(m));
  }
}

export interface Entry {
  link: NodeLink;
  conn: Conn | undefined;
  /** Milliseconds of the last message (the in-memory last_seen). */
  lastSeenMs: number;
  /** Seen since the last flush. */
  dirty: boolean;
  /** The node's database work, in order. */
  chain: Promise<void>;
  /** The node's events received and not yet folded (intake.ts), bounded (docs/farm.md, "The portal's inbox"). */
  inbox: StreamItem[];
  /** Replicas "many": the ownership epoch taken at the node's last hello here (undefined before the first). */
  epoch?: number;
  /** The bytes of the frames in `inbox`. */
  inboxBytes: number;
  /**
   * Set while the portal takes none of the node's events: `full` (the inbox reached its bound; the node is asked to
   * resend after `after` once it is empty), `replay` (asked; until the node's replay marker for `after` arrives).
   */
  deferring?: { phase: 'full' | 'replay'; after: string | null };
  /** Where the node.state now in `link` stands among the node's events ([boot, n]); null: none from this stream yet. */
  stateAt: [number, number] | null;
}

export class NodeTable {
  readonly entries = new Map<string, Entry>();

  constructor(
    private readonly logger: Logger,
    /** Whether the hub is closed (work failing on a database away is then not retried). */
    private readonly closed: () => boolean,
    /** Replicas "many": this replica's id (writes about a node are conditioned on owning it). */
    readonly replicaId?: string,
  ) {}

  /** The condition of a write about the node, read when the write runs: undefined for replicas "single". */
  tenure(entry: Entry): Tenure | undefined {
    return this.replicaId === undefined ? undefined : { replica: this.replicaId, epoch: entry.epoch ?? -1 };
  }

  /**
   * A write under `t` matched no row: the node moved to another replica. Its connection here (if still the one
   * of that epoch) is dropped, with nothing more written about it; it reconnects, maybe here again.
   */
  dropMoved(entry: Entry, t: Tenure): void {
    if (entry.epoch === undefined || entry.epoch !== t.epoch) return;
    const conn = entry.conn;
    entry.conn = undefined;
    entry.epoch = undefined;
    entry.dirty = false;
    entry.link.online = false;
    entry.link.offlineReason = 'connected to another portal replica';
    this.logger.warn({ node: entry.link.nodeId, epoch: t.epoch }, 'a node moved to another portal replica: its connection here is dropped, nothing more is written about it');
    conn?.ws.close(CLOSE_MOVED, 'the node is owned by another portal replica');
  }

  get(nodeId: string): Entry | undefined {
    return this.entries.get(nodeId);
  }

  /** The node's entry, made (offline, never seen) when it has none. */
  entryFor(nodeId: string, offlineReason: string | null = 'not connected since the portal started', lastSeenMs = 0): Entry {
    let entry = this.entries.get(nodeId);
    if (!entry) {
      entry = {
        link: { nodeId, online: false, offlineReason, version: null, externalIp: null, lastSeen: null, snapshot: null, availability: null, job: null },
        conn: undefined,
        lastSeenMs,
        dirty: false,
        chain: Promise.resolve(),
        inbox: [],
        inboxBytes: 0,
        stateAt: null,
      };
      this.entries.set(nodeId, entry);
    }
    return entry;
  }

  /** Resolves when every node's pending database work is done (tests, close). */
  async idle(): Promise<void> {
    for (;;) {
      const chains = [...this.entries.values()].map((e) => e.chain);
      await Promise.all(chains);
      if ([...this.entries.values()].every((e, i) => e.chain === chains[i])) return;
    }
  }

  enqueue(entry: Entry, work: () => Promise<void>, onError?: () => void): void {
    entry.chain = entry.chain.then(work).catch((e: unknown) => {
      this.logger.error({ err: e, node: entry.link.nodeId }, 'recording a node\'s state in the database failed');
      onError?.();
    });
  }

  /**
   * Run `work`, again and again (back-off 250 ms doubling to 5 s) while it fails because the database cannot be
   * reached, until it succeeds, fails otherwise, or the hub closes. On a node's chain it holds that node's later
   * work, so its events are still recorded in the order they came.
   */
  async untilDatabaseBack<T>(work: () => Promise<T>): Promise<T> {
    for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
      try {
        return await work();
      } catch (e) {
        if (!isDatabaseUnavailable(e) || this.closed()) throw e;
        this.logger.warn({ err: e, retry_in_ms: wait }, 'the database is away: recording a node event again in a moment');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }
}
