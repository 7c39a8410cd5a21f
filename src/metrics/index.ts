/** Prometheus metrics of the node: built and wired only by the composition root (src/daemon.ts). */
export { FarmMetrics, IR_TRANSPORTS, RUN_OUTCOMES, SIGNAL_STATES, transportLabel, type CaptureStats, type MetricSources, type MetricsOptions, type NodeStateReading } from './metrics.js';
export { httpMetrics } from './http.js';
export { observeIrTransport, observeResults } from './observe.js';
