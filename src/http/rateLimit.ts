/**
 * Rate limiting: a token bucket per client, so a flood of parallel requests
 * gets 429 while one client's normal traffic (a run, its polls, its artifact
 * downloads) never does (COMPAT.md: the v2 client treats 429 as fatal).
 *
 * - The client is the token id when the caller is authenticated (so one CI
 *   system behind NAT with several tokens is several clients), else the
 *   remote address. Run `authenticate` before this middleware.
 * - Each client has two buckets: one for the API, and a larger one for
 *   artifact downloads ("a generous burst allowance", the spec says). Both
 *   refill at `requests_per_second`.
 * - A request takes one token on arrival. A long poll held for 55 s is one
 *   request: holding it costs nothing more.
 * - Memory is bounded: a full bucket is the same as no bucket, so idle
 *   clients are dropped; past `maxClients` the least recently seen go first.
 *   No timer: the sweeping happens on requests.
 */
import { performance } from 'node:perf_hooks';
import type { Context, Middleware, Next } from 'koa';
import { FarmError } from '../core/errors.js';
import { userOf } from './auth.js';

/** The config's `rate_limit` section. */
export interface RateLimitSettings {
  requests_per_second: number;
  burst: number;
  artifact_burst: number;
}

export type BucketKind = 'api' | 'artifact';

export interface RateLimiterOptions {
  /** Milliseconds on a monotonic clock; tests pass a fake one. */
  now?: () => number;
  /** Most buckets kept at once (two per active client at most). Default 20,000 (about 4.5 MB of heap). */
  maxBuckets?: number;
  /** How often idle buckets are swept even when under the cap. Default 60 s. */
  sweepEveryMs?: number;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date. */
  at: number;
  cap: number;
}

/** Token buckets keyed by client and kind; pure bookkeeping, no Koa. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;
  private readonly maxBuckets: number;
  private readonly sweepEveryMs: number;
  private lastSweep: number;

  constructor(
    readonly settings: RateLimitSettings,
    opts: RateLimiterOptions = {},
  ) {
    this.now = opts.now ?? (() => performance.now());
    this.maxBuckets = opts.maxBuckets ?? 20_000;
    this.sweepEveryMs = opts.sweepEveryMs ?? 60_000;
    this.lastSweep = this.now();
  }

  /** Take one request's token: 0 when allowed, else whole seconds (>= 1) until one is available. */
  take(client: string, kind: BucketKind): number {
    const t = this.now();
    const key = `${kind} ${client}`;
    const b = this.refilled(this.buckets.get(key), kind, t);
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    // Re-inserting keeps the map in least-recently-used order for eviction.
    this.buckets.delete(key);
    this.buckets.set(key, b);
    this.housekeep(t);
    return allowed ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / this.settings.requests_per_second));
  }

  /** Number of buckets held (for tests and health reports). */
  get size(): number {
    return this.buckets.size;
  }

  private refilled(b: Bucket | undefined, kind: BucketKind, t: number): Bucket {
    const cap = kind === 'artifact' ? this.settings.artifact_burst : this.settings.burst;
    if (!b) return { tokens: cap, at: t, cap };
    const elapsed = Math.max(0, t - b.at) / 1000;
    return { tokens: Math.min(cap, b.tokens + elapsed * this.settings.requests_per_second), at: t, cap };
  }

  private housekeep(t: number): void {
    if (this.buckets.size <= this.maxBuckets && t - this.lastSweep < this.sweepEveryMs) return;
    this.lastSweep = t;
    for (const [key, b] of this.buckets) {
      if (b.tokens + (Math.max(0, t - b.at) / 1000) * this.settings.requests_per_second >= b.cap) this.buckets.delete(key);
    }
    // Still too many busy clients (a flood from many addresses): forget the least recently
    // seen, down to 90% so the next sweep is not one request away.
    if (this.buckets.size > this.maxBuckets) {
      let excess = this.buckets.size - Math.floor(this.maxBuckets * 0.9);
      for (const key of this.buckets.keys()) {
        if (excess-- <= 0) break;
        this.buckets.delete(key);
      }
    }
  }
}

/**
 * The artifact download endpoints, which get the larger bucket: a result's
 * artifact listing and files, its saved screenshot and its logs, in v1 and v2.
 * (The live node screenshot is not one: it costs a PNG encode.)
 */
export function isArtifactPath(path: string): boolean {
  const p = path.toLowerCase();
  if (!/^\/api\/(v2\/results|v1\/result)\//.test(p)) return false;
  return /\/artifacts(\/|$)/.test(p) || p.endsWith('/screenshot.png') || p.endsWith('.log');
}

/** The bucket owner: the token id of an authenticated caller, else the remote address. */
export function clientKey(ctx: Context): string {
  const user = userOf(ctx);
  return user ? `token:${user.tokenId}` : `addr:${ctx.ip}`;
}

export interface RateLimitOptions extends RateLimiterOptions {
  /** Which paths use the artifact bucket; default `isArtifactPath`. */
  isArtifact?: (path: string) => boolean;
}

/** Koa middleware: 429 `rate_limited` with `Retry-After` (via the error handler) over the limit. */
export function rateLimit(limits: RateLimitSettings | RateLimiter, opts: RateLimitOptions = {}): Middleware {
  const limiter = limits instanceof RateLimiter ? limits : new RateLimiter(limits, opts);
  const isArtifact = opts.isArtifact ?? isArtifactPath;
  const { requests_per_second: rate, burst, artifact_burst: artifactBurst } = limiter.settings;
  return async function limitRate(ctx: Context, next: Next): Promise<void> {
    const kind: BucketKind = isArtifact(ctx.path) ? 'artifact' : 'api';
    const retryAfter = limiter.take(clientKey(ctx), kind);
    if (retryAfter > 0) {
      const allowance = kind === 'artifact' ? `${artifactBurst} artifact downloads` : `${burst} requests`;
      throw new FarmError(
        'rate_limited',
        `too many requests from this client: up to ${allowance} at once, then ${rate} per second; retry in ${retryAfter} s`,
        { retryAfter },
      );
    }
    await next();
  };
}
