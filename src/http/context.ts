/** What the routers are given: the services, and how to build absolute URLs. */
import type { Context } from 'koa';
import type { JobService } from '../core/jobs.js';
import type { KeyPresser } from '../hardware/ir/keys.js';
import type { NodeService } from '../core/node.js';
import type { ReservationService } from '../core/reservations.js';
import type { FrameSource, Logger, ResultRepository, TestPack } from '../core/ports.js';

export interface Services {
  nodeId: string;
  version: string;
  jobs: JobService;
  results: ResultRepository;
  testPack: TestPack;
  frames: FrameSource;
  logger: Logger;
  /** Absolute base URL from the config; else each request's own. */
  publicUrl?: string;
  /** Key presses for the press endpoint (the same path test scripts use). */
  keys: Pick<KeyPresser, 'press' | 'chooseRemoteV2'>;
  /** How long await_completion holds a request (the spec: 55 s). */
  awaitCompletionSecs: number;
  /** v2's node status, licence and last use. */
  node: NodeService;
  /** v2's reservations: they also guard run, stop and press. */
  reservations: ReservationService;
}

export type ApiVersion = 'v1' | 'v2';

/** `http://host:port` the client used (or the configured public URL), no trailing slash. */
export function baseUrl(ctx: Context, s: Services): string {
  return (s.publicUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
}
