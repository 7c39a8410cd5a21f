/** What the routers are given: the services, and how to build absolute URLs. */
import type { Context } from 'koa';
import type { AuditLog } from '../core/audit.js';
import type { EventHub } from '../core/events.js';
import type { JobService } from '../core/jobs.js';
import type { Caller, NodePolicy } from '../core/nodePolicy.js';
import type { FrameSource, Logger, ResultRepository, TestPack } from '../core/ports.js';
import type { WebhookDispatcher } from '../notify/webhooks.js';
import { delegatedBaseUrlOf } from './auth.js';
import type { EventStream } from './events.js';
import type { PowerOutlet } from '../hardware/power/index.js';

/** The node's outlet as the HTTP layer uses it (Services.power), with the node's reservation rule. */
export interface NodePower {
  outlet: Pick<PowerOutlet, 'uri' | 'offSecs' | 'cycle'>;
  /** Throws 403 `forbidden` when someone other than `user` holds the node's reservation, naming `what`. */
  assertCanUse(user: string | undefined, what: string): void;
}

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
  /** How long await_completion holds a request (the spec: 55 s). */
  awaitCompletionSecs: number;
  /** Node use for both versions: run, stop, press, pictures, status, reservations. */
  policy: NodePolicy;
  /** The event hub, its SSE endpoint and the webhooks (docs/events.md); their getters feed the metrics. */
  events?: { hub: EventHub; stream: EventStream; webhooks: WebhookDispatcher };
  /** The audit trail (docs/auth.md): `GET /api/v2/audit` and the page `/app/audit` read it; absent: not served. */
  audit?: AuditLog;
  /** The node's power outlet (`power.uri`; docs/power.md); absent: the node has none. */
  power?: NodePower;
}

export type ApiVersion = 'v1' | 'v2';

/**
 * `http://host:port` the client used (or the configured public URL), no trailing slash. A request
 * the portal forwarded (auth.ts DelegateRule) uses the portal's base URL, so links point at the portal.
 */
export function baseUrl(ctx: Context, s: Services): string {
  return (delegatedBaseUrlOf(ctx) ?? s.publicUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
}

/** The authenticated user of a request, if any (the auth guard makes sure v2 routes have one). */
export const userOf = (ctx: Context): string | undefined => (ctx.state as { user?: { login: string } }).user?.login;

/** The caller as the node policy sees it. */
export const callerOf = (ctx: Context, api: ApiVersion): Caller => ({ user: userOf(ctx), api });
