/**
 * The portal's Koa app: the node's middleware, in the node's order (errors ->
 * who is calling -> rate limit -> token required on v2 -> body -> routes),
 * with the portal's routes behind it. Programs call the portal with v2 tokens;
 * people sign in once with one and carry the node's session cookie
 * (src/http/session.ts: the same sign-in page and CSRF rule as a node; the
 * sessions themselves in PostgreSQL, src/farm/webSessions.ts), which the API middleware accepts where the node's does.
 */
import { IncomingMessage } from 'node:http';
import Koa, { type Context, type Middleware } from 'koa';
import type Router from '@koa/router';
import type { TokenVerifier } from '../../core/auth.js';
import { FarmError } from '../../core/errors.js';
import type { Logger } from '../../core/ports.js';
import { foldTrailingSlash } from '../../http/app.js';
import { authorizeRoutes } from '../../http/endpoints/authorize.js';
import type { AuditTrail } from '../../http/audit.js';
import { authenticate, FORM_PATHS, guardApi } from '../../http/auth.js';
import { formBody, jsonBody } from '../../http/body.js';
import { refuseCrossSiteRequests } from '../../http/crossSite.js';
import { rememberCredential } from '../../http/heldCredential.js';
import { errorHandler } from '../../http/errors.js';
import { rateLimit, type RateLimitSettings } from '../../http/rateLimit.js';
import { securityHeaders } from '../../http/securityHeaders.js';
import { databaseUnavailable, isDatabaseUnavailable } from '../db/pool.js';
import { signInRouter } from '../../web/pages/signIn.js';
import { SessionStore, type WebSessionStore } from '../../http/session.js';
import type { OidcSignIn } from '../../http/oidc.js';
import { oidcSignInRouter, type OnOidcSignIn } from '../../web/pages/oidcSignIn.js';
import { staticRouter } from '../../web/static.js';
import { forbiddenPages } from '../../web/pages/forbidden.js';
import { adoptReplicaCaller, replicaCallerOf, replicaEdge } from './replicaAuth.js';
import { rateExempt } from '../../http/endpoints/rateExempt.js';

export interface PortalAppOptions {
  logger: Logger;
  tokens: TokenVerifier;
  /** People's sessions: the portal's PostgreSQL store (src/farm/webSessions.ts); default in memory (a restart ends them). */
  sessions?: WebSessionStore;
  rateLimit: RateLimitSettings;
  maxBodyBytes: number;
  /** The config's `public_url`: an `Origin` of it is the portal's own (src/http/crossSite.ts). */
  publicUrl?: string;
  /** The config's `auth.v1_requires_token`: the pages, `/app/events` and v1 reads need a token or a session (default open, as on a node). */
  v1RequiresToken?: boolean;
  /** Mounted in order after the middleware (the portal's routes first; hC, hD, hE add theirs). */
  routers: Router[];
  /**
   * Mounted before the API's middleware: routes that authenticate their callers themselves and read
   * their own bodies (the nodes' upload API, src/farm/uploadRoutes.ts: raw chunks, node credentials,
   * not held to a person's rate limit).
   */
  early?: Router[];
  /** Sign-in with OpenID Connect (`[oidc]`, docs/auth.md); `onSignIn` records the person in `users`. */
  oidc?: { signIn: OidcSignIn; onSignIn: OnOidcSignIn };
  /** `/healthz`, `/readyz` and `/metrics` (src/farm/portal/ops.ts); absent: a bare `/healthz`. */
  ops?: Router;
  /** Records the audit trail of state-changing requests (src/http/audit.ts), as on a node. */
  audit?: AuditTrail;
  /** The farm's administrators, named on the 403 page as whom to ask (src/web/pages/forbidden.tsx). */
  admins?: () => Promise<string[]>;
  /** The replicas' shared secret (mode "many"): requests of other replicas are believed under it; none: all refused. */
  replicaSecret?: Buffer;
  /** Where a node-scoped request is answered (nodePlace.ts): mounted after body parsing, before the routers. */
  nodePlaces?: Middleware;
}

export function createPortalApp(o: PortalAppOptions): Koa {
  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  app.use(securityHeaders);
  app.use(errorHandler(o.logger));
  // PostgreSQL away (restarting, down): a 503 saying so, never a 500 (docs/farm.md, "Faults").
  app.use(async (_ctx, next) => {
    try {
      await next();
    } catch (e) {
      throw isDatabaseUnavailable(e) ? databaseUnavailable(e) : e;
    }
  });
  app.use(foldTrailingSlash);
  for (const router of o.early ?? []) app.use(router.routes());
  // People's sessions: in PostgreSQL on the portal (every replica sees them; a restart ends none).
  const sessions = o.sessions ?? new SessionStore(o.tokens);
  // The replicas' headers are believed only signed by another replica, and removed here either way (replicaAuth.ts).
  app.use(replicaEdge(o.replicaSecret));
  app.use(authenticate(o.tokens, sessions));
  app.use(adoptReplicaCaller);
  app.use(refuseCrossSiteRequests({ publicUrl: o.publicUrl }));
  app.use(rememberCredential(o.tokens, sessions));
  // The table's `rateLimited: false` entries are exempt, as on the node: long polls (a held request costs a
  // promise, and clients call again at once) and a load balancer's probes (behind one, every request comes from
  // its address, and a 429 on /readyz would take a healthy portal out of service): rateExempt.ts.
  const limit = rateLimit(o.rateLimit);
  const exempt = rateExempt();
  app.use((ctx, next): Promise<unknown> => (exempt(ctx.method, ctx.path) ? next() : limit(ctx, next)));
  // A request passed between replicas is in the trail once: the row of the replica the caller called, with the
  // caller's own address and credential, and what the owner's answer made (readPassedAnswer); the owner that serves
  // it records nothing more (docs/farm.md, "The farm suite through replicas").
  const audit = o.audit?.middleware;
  if (audit) {
    app.use((ctx, next): Promise<void> =>
      replicaCallerOf(ctx)
        ? (next() as Promise<void>)
        : audit(ctx, async () => {
            await next();
            await readPassedAnswer(ctx);
          }),
    );
  }
  app.use(guardApi({ v1RequiresToken: o.v1RequiresToken ?? false }));
  const json = jsonBody(o.maxBodyBytes);
  // The sign-in and sign-out forms post urlencoded fields, as on a node.
  const form = formBody(Math.min(o.maxBodyBytes, 16 * 1024));
  app.use((ctx, next) => (FORM_PATHS.has(ctx.path.toLowerCase()) ? form(ctx, next) : json(ctx, next)));
  // A role check's 403 to a person's browser is a page, as on a node; to programs, JSON.
  app.use(forbiddenPages({ farm: true, ...(o.admins && { admins: o.admins }) }));
  if (o.nodePlaces) app.use(o.nodePlaces);
  if (!o.ops) {
    app.use(async (ctx, next) => {
      if (ctx.path === '/healthz') {
        ctx.body = { status: 'ok' };
        return;
      }
      await next();
    });
  }
  const oidc = o.oidc ? [oidcSignInRouter(sessions, o.oidc.signIn, { farm: true, onSignIn: o.oidc.onSignIn })] : [];
  const signIn = signInRouter(sessions, { farm: true, ...(o.oidc && { oidc: o.oidc.signIn.name }) });
  for (const router of [...(o.ops ? [o.ops] : []), ...oidc, ...o.routers, staticRouter(), signIn]) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  // Every route's role check, from the table of endpoints (src/http/endpoints/); the early routers' too.
  authorizeRoutes(app);
  return app;
}

/**
 * The small JSON answer of a state-changing request another replica served (ReplicaProxy streams it), read whole, so
 * the audit trail's row names what it made (a job_uid, a reservation), as for a node's own forwarded answer. GETs
 * (long polls, streams), bodies of unknown or large length and other types stay streamed. An owner that breaks off
 * mid-answer: 503, as when it breaks off before answering.
 */
async function readPassedAnswer(ctx: Context): Promise<void> {
  const b: unknown = ctx.body;
  if (ctx.method === 'GET' || ctx.method === 'HEAD' || !(b instanceof IncomingMessage)) return;
  const length = Number(ctx.response.get('Content-Length') || NaN);
  if (!/json/i.test(ctx.response.get('Content-Type')) || !(length >= 0 && length <= 1 << 20)) return;
  const chunks: Buffer[] = [];
  try {
    for await (const c of b) chunks.push(c as Buffer);
  } catch {
    throw new FarmError('device_unavailable', 'the portal replica that holds the node broke off its answer; try again');
  }
  ctx.body = Buffer.concat(chunks);
}
