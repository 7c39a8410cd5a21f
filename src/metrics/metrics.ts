/**
 * The node's Prometheus metrics (docs/operations.md, "Metrics"). One
 * prom-client Registry of its own (never the global one, so two daemons in
 * one process - the tests - keep apart). Names start with `farmhand_`, use
 * base units (seconds, bytes) and counters end in `_total`. No label carries
 * a job or result id: label values come from small fixed sets, and every
 * value of those sets is exported from the start, at zero.
 *
 * Two kinds of numbers: events are counted as they happen (a run recorded, a
 * key press, an HTTP request: `observe.ts` and `http.ts` call the `record*`
 * methods), states are read when Prometheus scrapes (`MetricSources`), so a
 * scrape always shows the node as it is.
 */
import { INFRASTRUCTURE_KINDS } from '../core/infrastructure.js';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ResultRecord } from '../core/model.js';

/** Outcomes of a run, as `ResultRecord.result` has them. */
export const RUN_OUTCOMES = ['pass', 'fail', 'error'] as const;

/** What the picture shows (hardware/capture SignalState). */
export const SIGNAL_STATES = ['ok', 'black', 'frozen', 'none'] as const;

/** IR transports by URI scheme (hardware/ir/transports). */
export const IR_TRANSPORTS = ['irtoy', 'lircd', 'virtual', 'none'] as const;

/** What the capture pipeline reports at scrape time; undefined parts are not exported. */
export interface CaptureStats {
  /** Frames handed to Node since start (every ffmpeg run added up). */
  framesReceived: number;
  /** Seconds since the latest frame arrived; undefined before the first. */
  frameAgeSecs: number | undefined;
  /** ffmpeg restarts since start (crash, stall, recording resumed). */
  restarts: number;
  signal: (typeof SIGNAL_STATES)[number];
}

/** The node's state, read at every scrape. */
export interface NodeStateReading {
  online: boolean;
  available: boolean;
  reserved: boolean;
  running: boolean;
}

/** Functions the composition root gives: each is called once per scrape. */
export interface MetricSources {
  node: () => NodeStateReading;
  /** Absent when capture is `none:` (no pipeline to report on); undefined before the pipeline exists. */
  capture?: () => CaptureStats | undefined;
  /** Live results in the index. */
  resultsStored: () => number;
  /** Free bytes on the data directory's filesystem (statfs). */
  diskFreeBytes: () => Promise<number>;
  // Issue 8, wired by the lead after the merge: event-stream clients and webhook deliveries
  // (helper h4 exposes them as plain getters). Absent: the series are not exported.
  /** Event-stream (SSE) clients connected now. */
  eventClients?: () => number;
  /** 1 while the node's portal link is welcomed (docs/farm.md); absent when no portal is configured. */
  portalConnected?: () => boolean;
  /** Webhook deliveries since start, by outcome (e.g. `{ delivered: 3, failed: 1 }`). */
  webhookDeliveries?: () => Record<string, number>;
}

export interface MetricsOptions {
  version: string;
  nodeId: string;
  sources: MetricSources;
  /** The label values of `farmhand_infrastructure_errors_total`; default INFRASTRUCTURE_KINDS (core/infrastructure.ts). */
  infrastructureKinds?: readonly string[];
  /** The IR transport this node drives (its scheme); its press series start at zero. */
  irTransport?: string;
  /** Webhook delivery outcomes to export at zero before the first delivery. */
  webhookOutcomes?: readonly string[];
}

/** Latency of one key press from the transport's call to "sent" (a hold can last up to 60 s). */
const PRESS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** A test run: seconds to hours. */
const RUN_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];
/** An HTTP request: milliseconds, up to a 55 s long poll. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const bool = (b: boolean) => (b ? 1 : 0);

/** Before the capture pipeline exists (start-up). */
const NO_CAPTURE: CaptureStats = { framesReceived: 0, frameAgeSecs: undefined, restarts: 0, signal: 'none' };

/** The scheme of a transport URI (`irtoy:/dev/ttyACM0` -> `irtoy`). */
export const transportLabel = (uri: string): string => uri.replace(/:.*$/s, '') || 'none';

export class FarmMetrics {
  readonly registry = new Registry();
  private readonly runs: Counter<'outcome'>;
  private readonly runDuration: Histogram<'outcome'>;
  private readonly infraErrors: Counter<'kind'>;
  private readonly presses: Counter<'transport' | 'outcome'>;
  private readonly pressLatency: Histogram<'transport'>;
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route'>;
  private readonly sources: MetricSources;
  private reading: { node: NodeStateReading; capture: CaptureStats | undefined } | undefined;

  constructor(o: MetricsOptions) {
    const registers = [this.registry];
    const s = (this.sources = o.sources);
    const readings = () => this.readings();

    new Gauge({
      name: 'farmhand_build_info',
      help: 'Always 1: the farmhand version and the Node.js version running it.',
      labelNames: ['version', 'nodejs'],
      registers,
    }).set({ version: o.version, nodejs: process.versions.node }, 1);
    new Gauge({ name: 'farmhand_node_info', help: 'Always 1: the node id of this daemon.', labelNames: ['node_id'], registers }).set({ node_id: o.nodeId }, 1);

    // Node state: four 0/1 gauges read together, so one scrape is self-consistent.
    const nodeGauges = {
      online: 'farmhand_node_online',
      available: 'farmhand_node_available',
      reserved: 'farmhand_node_reserved',
      running: 'farmhand_node_running',
    } as const;
    const helps: Record<keyof NodeStateReading, string> = {
      online: '1 while the capture delivers a picture of the device under test.',
      available: '1 while the node would accept a new job now (online, licensed, not reserved, not running).',
      reserved: '1 while a v2 reservation holds the node.',
      running: '1 while a test job runs.',
    };
    for (const key of Object.keys(nodeGauges) as Array<keyof NodeStateReading>) {
      new Gauge({
        name: nodeGauges[key],
        help: helps[key],
        registers,
        collect() {
          this.set(bool(readings().node[key]));
        },
      });
    }

    if (s.capture) {
      const stats = () => readings().capture ?? NO_CAPTURE;
      new Counter({
        name: 'farmhand_capture_frames_received_total',
        help: 'Preview frames the capture pipeline delivered to the daemon.',
        registers,
        collect() {
          setCounter(this, stats().framesReceived);
        },
      });
      new Gauge({
        name: 'farmhand_capture_frame_age_seconds',
        help: 'Seconds since the latest frame arrived (absent before the first frame).',
        registers,
        collect() {
          this.reset();
          const age = stats().frameAgeSecs;
          if (age !== undefined) this.set(age);
        },
      });
      new Counter({
        name: 'farmhand_capture_restarts_total',
        help: 'Restarts of the capture process (ffmpeg exited, stalled, or recording resumed).',
        registers,
        collect() {
          setCounter(this, stats().restarts);
        },
      });
      new Gauge({
        name: 'farmhand_capture_signal',
        help: 'What the picture shows: 1 for the current state (ok, black, frozen, none = no frames).',
        labelNames: ['state'],
        registers,
        collect() {
          const now = stats().signal;
          for (const state of SIGNAL_STATES) this.set({ state }, bool(state === now));
        },
      });
    }

    this.presses = new Counter({
      name: 'farmhand_key_presses_total',
      help: 'Key presses sent through the IR transport, by transport and outcome (ok, error).',
      labelNames: ['transport', 'outcome'],
      registers,
    });
    this.pressLatency = new Histogram({
      name: 'farmhand_key_press_duration_seconds',
      help: 'Seconds from handing a key press to the IR transport until it reported the IR sent (successful presses).',
      labelNames: ['transport'],
      buckets: PRESS_BUCKETS,
      registers,
    });
    const transport = transportLabel(o.irTransport ?? 'none');
    for (const outcome of ['ok', 'error']) this.presses.labels({ transport, outcome }).inc(0);
    this.pressLatency.zero({ transport });

    this.runs = new Counter({
      name: 'farmhand_test_runs_total',
      help: 'Test runs recorded, by outcome (pass, fail, error).',
      labelNames: ['outcome'],
      registers,
    });
    this.runDuration = new Histogram({
      name: 'farmhand_test_run_duration_seconds',
      help: 'Duration of recorded test runs, by outcome.',
      labelNames: ['outcome'],
      buckets: RUN_BUCKETS,
      registers,
    });
    for (const outcome of RUN_OUTCOMES) {
      this.runs.labels({ outcome }).inc(0);
      this.runDuration.zero({ outcome });
    }

    this.infraErrors = new Counter({
      name: 'farmhand_infrastructure_errors_total',
      help: 'Error results caused by the node rather than the test script, by kind.',
      labelNames: ['kind'],
      registers,
    });
    for (const kind of o.infrastructureKinds ?? INFRASTRUCTURE_KINDS) this.infraErrors.labels({ kind }).inc(0);

    // Routes and statuses are an open set: a series appears with its first request.
    this.httpRequests = new Counter({
      name: 'farmhand_http_requests_total',
      help: 'HTTP requests answered, by method, matched route pattern (no ids) and status.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'farmhand_http_request_duration_seconds',
      help: 'Seconds to answer an HTTP request (long polls included), by method and route pattern.',
      labelNames: ['method', 'route'],
      buckets: HTTP_BUCKETS,
      registers,
    });

    new Gauge({
      name: 'farmhand_results_stored',
      help: 'Results kept in the results store (retention deletes the oldest).',
      registers,
      collect() {
        this.set(s.resultsStored());
      },
    });
    new Gauge({
      name: 'farmhand_data_dir_free_bytes',
      help: "Free bytes on the data directory's filesystem (for unprivileged users).",
      registers,
      async collect() {
        this.set(await s.diskFreeBytes());
      },
    });

    // ---- event stream and webhooks: the lead wires the sources (MetricSources.eventClients / webhookDeliveries).
    if (s.portalConnected) {
      const connected = s.portalConnected;
      new Gauge({
        name: 'farmhand_portal_connected',
        help: '1 while the connection to the farm portal is up (welcomed), 0 otherwise.',
        registers,
        collect() {
          this.set(connected() ? 1 : 0);
        },
      });
    }
    if (s.eventClients) {
      const clients = s.eventClients;
      new Gauge({
        name: 'farmhand_event_stream_clients',
        help: 'Event-stream clients connected now.',
        registers,
        collect() {
          this.set(clients());
        },
      });
    }
    if (s.webhookDeliveries) {
      const deliveries = s.webhookDeliveries;
      const outcomes = o.webhookOutcomes ?? [];
      new Counter({
        name: 'farmhand_webhook_deliveries_total',
        help: 'Webhook deliveries since start, by outcome.',
        labelNames: ['outcome'],
        registers,
        collect() {
          const now = deliveries();
          this.reset();
          for (const outcome of new Set([...outcomes, ...Object.keys(now)])) this.labels({ outcome }).inc(now[outcome] ?? 0);
        },
      });
    }
  }

  /** The exposition's Content-Type (text format 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** The whole exposition, collected now. */
  async scrape(): Promise<string> {
    // One reading of the node and the capture per scrape, so the gauges of a scrape agree with each other.
    this.reading = undefined;
    try {
      return await this.registry.metrics();
    } finally {
      this.reading = undefined;
    }
  }

  /** The state sources, read once per scrape (on first use). */
  private readings(): { node: NodeStateReading; capture: CaptureStats | undefined } {
    this.reading ??= { node: this.sources.node(), capture: this.sources.capture?.() };
    return this.reading;
  }

  /** A run was recorded (the results repository's `add` resolved). */
  recordRun(record: ResultRecord & { infrastructure_error?: string | null }): void {
    this.runs.inc({ outcome: record.result });
    this.runDuration.observe({ outcome: record.result }, Math.max(0, record.duration));
    if (record.infrastructure_error) this.infraErrors.inc({ kind: record.infrastructure_error });
  }

  /** A key press ended: `secs` from the transport call until it resolved or failed. */
  recordPress(transport: string, ok: boolean, secs: number): void {
    const t = transportLabel(transport);
    this.presses.inc({ transport: t, outcome: ok ? 'ok' : 'error' });
    if (ok) this.pressLatency.observe({ transport: t }, secs);
  }

  /** An HTTP request was answered. `route` is the matched pattern, never the raw path. */
  recordHttp(method: string, route: string, status: number, secs: number): void {
    this.httpRequests.inc({ method, route, status: String(status) });
    this.httpDuration.observe({ method, route }, secs);
  }
}

/** A counter whose total lives elsewhere: set it to that total at collect time. */
function setCounter(c: Counter, total: number): void {
  c.reset();
  c.inc(total);
}
