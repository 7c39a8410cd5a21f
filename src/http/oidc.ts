/**
 * Sign-in with OpenID Connect: the Authorization Code flow with PKCE, over openid-client
 * (docs/auth.md, "Sign-in with OpenID Connect"). The routes and pages are src/web/pages/oidcSignIn.tsx.
 *
 * - The provider's metadata is discovered at the first sign-in, not at start-up: a node or portal
 *   starts while the provider is down. A failed discovery is not kept; the next sign-in tries again.
 * - A flow in progress (state, nonce, PKCE code_verifier, where to go afterwards) is kept in a
 *   {@link OidcFlowStore} under a random id that the browser holds in a short-lived HttpOnly cookie; it
 *   is used once (taken at the callback, whatever the outcome) and forgotten after {@link FLOW_TTL_MS}.
 *   A node keeps its flows in memory ({@link MemoryFlowStore}); the portal in PostgreSQL
 *   (src/farm/oidcFlows.ts), so a flow started on one replica finishes on any other.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import * as client from 'openid-client';
import type { OidcConfig } from '../config/oidc.js';
import type { ClaimRules } from '../core/oidc.js';
import type { Logger } from '../core/ports.js';

/** A flow not finished within this is forgotten: the person starts again. */
export const FLOW_TTL_MS = 10 * 60 * 1000;
/** At most this many flows in progress (the oldest is dropped): memory stays bounded whoever starts them. */
export const FLOW_LIMIT = 10_000;
export const FLOW_COOKIE = 'farmhand_oidc';
export const CALLBACK_PATH = '/app/oidc/callback';
/** A flow id: 32 random bytes, base64url. */
const FLOW_ID = /^[A-Za-z0-9_-]{43}$/;

/** A sign-in in progress: what the callback needs to check the provider's answer. */
export interface OidcFlow {
  state: string;
  nonce: string;
  verifier: string;
  next: string;
  redirectUri: string;
}

/**
 * Where flows in progress wait for their callback. `take` answers the flow and forgets it in one step
 * (a flow is used once: two callbacks with the same id, on one process or on two, get it at most once),
 * and answers nothing for a flow older than `ttlMs` given at `put`. At most {@link FLOW_LIMIT} flows wait
 * (the oldest go first), whoever starts them.
 */
export interface OidcFlowStore {
  put(id: string, flow: OidcFlow, ttlMs: number): Promise<void>;
  take(id: string): Promise<OidcFlow | undefined>;
}

/** The flows of one process, in memory: the node's (a single appliance with no database). */
export class MemoryFlowStore implements OidcFlowStore {
  private readonly flows = new Map<string, { flow: OidcFlow; expires: number }>();
  constructor(private readonly now: () => number = Date.now) {}

  put(id: string, flow: OidcFlow, ttlMs: number): Promise<void> {
    this.sweep();
    this.flows.set(id, { flow, expires: this.now() + ttlMs });
    while (this.flows.size > FLOW_LIMIT) this.flows.delete(this.flows.keys().next().value as string);
    return Promise.resolve();
  }

  take(id: string): Promise<OidcFlow | undefined> {
    this.sweep();
    const f = this.flows.get(id);
    this.flows.delete(id);
    return Promise.resolve(f && this.now() < f.expires ? f.flow : undefined);
  }

  /** Flows in progress (tests). */
  get size(): number {
    return this.flows.size;
  }

  private sweep(): void {
    const t = this.now();
    for (const [id, f] of this.flows) {
      if (t < f.expires) break; // insertion order is expiry order (one TTL)
      this.flows.delete(id);
    }
  }
}

/** Why a sign-in failed, for the page or the JSON error (src/web/pages/oidcSignIn.tsx). */
export class OidcFailure extends Error {
  constructor(
    readonly code: 'provider_unreachable' | 'sign_in_expired' | 'bad_state' | 'provider_refused' | 'sign_in_failed',
    message: string,
    /** Where the person wanted to go, when the flow was found (the retry link keeps it). */
    readonly next = '/',
  ) {
    super(message);
  }
}

export interface OidcSignInOptions {
  /** The config's `public_url`: the default redirect URL's origin. */
  publicUrl?: string;
  /** The client secret (read from `client_secret_file` at start: {@link readClientSecret}). */
  clientSecret: string;
  /** Where a failed discovery or a failed verification is told to the operator (never a code, token or claim). */
  logger?: Logger;
  /** Where flows wait for their callback (default: this process's memory, {@link MemoryFlowStore}). */
  flows?: OidcFlowStore;
}

export class OidcSignIn {
  readonly name: string;
  readonly rules: ClaimRules;
  readonly sessionMaxMs: number;
  private discovered?: Promise<client.Configuration>;
  private readonly flows: OidcFlowStore;

  constructor(
    readonly cfg: OidcConfig,
    private readonly o: OidcSignInOptions,
  ) {
    this.name = cfg.name;
    this.flows = o.flows ?? new MemoryFlowStore();
    this.sessionMaxMs = cfg.session_max_hours * 3600 * 1000;
    this.rules = {
      usernameClaim: cfg.username_claim,
      ...(cfg.role_claim !== undefined && { roleClaim: cfg.role_claim }),
      roleMap: cfg.role_map,
      ...(cfg.default_role !== undefined && { defaultRole: cfg.default_role }),
    };
  }

  /** The provider's metadata, discovered once; a failure is not kept (the next sign-in tries again). */
  private config(): Promise<client.Configuration> {
    this.discovered ??= (async () => {
      const issuer = new URL(this.cfg.issuer);
      // http only for a loopback issuer (the config refuses any other): allowed explicitly, as openid-client asks.
      const options: client.DiscoveryRequestOptions = { timeout: 10, ...(issuer.protocol === 'http:' && { execute: [client.allowInsecureRequests] }) };
      return client.discovery(issuer, this.cfg.client_id, undefined, client.ClientSecretBasic(this.o.clientSecret), options);
    })().catch((e: unknown) => {
      this.discovered = undefined;
      this.o.logger?.warn({ issuer: this.cfg.issuer, reason: reason(e) }, 'OIDC: the identity provider cannot be reached; sign-in with it fails until it can');
      throw new OidcFailure('provider_unreachable', `the identity provider (${this.cfg.issuer}) cannot be reached or did not answer its discovery document (${reason(e)}); try again in a moment, or sign in with an access token`);
    });
    return this.discovered;
  }

  /** The callback's URL: `redirect_url`, else `public_url`'s origin, else the request's own. */
  redirectUri(requestOrigin: string): string {
    if (this.cfg.redirect_url) return this.cfg.redirect_url;
    return new URL(CALLBACK_PATH, this.o.publicUrl ?? requestOrigin).href;
  }

  /** Begin a sign-in: the provider's authorization URL, and the flow's id for the cookie. */
  async start(requestOrigin: string, next: string): Promise<{ url: URL; flowId: string }> {
    const config = await this.config();
    const flow: OidcFlow = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      next,
      redirectUri: this.redirectUri(requestOrigin),
    };
    let url: URL;
    try {
      url = client.buildAuthorizationUrl(config, {
        redirect_uri: flow.redirectUri,
        scope: this.cfg.scopes,
        response_type: 'code',
        state: flow.state,
        nonce: flow.nonce,
        code_challenge: await client.calculatePKCECodeChallenge(flow.verifier),
        code_challenge_method: 'S256',
      });
    } catch (e) {
      // A discovery document without an authorization endpoint, for one: the provider's to fix.
      throw new OidcFailure('sign_in_failed', `the identity provider's configuration cannot be used (${reason(e)}); tell the administrator`, next);
    }
    const flowId = randomBytes(32).toString('base64url');
    await this.flows.put(flowId, flow, FLOW_TTL_MS);
    return { url, flowId };
  }

  /**
   * Finish a sign-in at the callback: the flow of the cookie (taken: a flow is used once), the state
   * compared, then openid-client checks the rest (the issuer, the code exchange with the PKCE verifier,
   * the ID token's signature, issuer, audience, expiry and nonce). Answers the claims (the ID token's,
   * with the UserInfo endpoint's added when the provider has one) and where to go next.
   */
  async finish(flowId: string | undefined, query: URLSearchParams): Promise<{ claims: Record<string, unknown>; next: string }> {
    // A cookie of another shape is no flow (and is not sent to the store).
    const flow = flowId && FLOW_ID.test(flowId) ? await this.flows.take(flowId) : undefined;
    if (!flow) throw new OidcFailure('sign_in_expired', 'this sign-in was not started in this browser, took longer than 10 minutes, or was already used: start it again');
    const error = query.get('error');
    if (error) {
      const desc = query.get('error_description');
      throw new OidcFailure('provider_refused', `the identity provider refused the sign-in: ${error}${desc ? ` (${desc})` : ''}`, flow.next);
    }
    if (!sameText(query.get('state') ?? '', flow.state)) {
      throw new OidcFailure('bad_state', 'the answer from the identity provider does not belong to the sign-in this browser started (its state differs): start again', flow.next);
    }
    const config = await this.config().catch((e: OidcFailure) => {
      throw new OidcFailure(e.code, e.message, flow.next);
    });
    const current = new URL(flow.redirectUri);
    current.search = query.toString();
    let claims: Record<string, unknown>;
    try {
      const tokens = await client.authorizationCodeGrant(config, current, { pkceCodeVerifier: flow.verifier, expectedState: flow.state, expectedNonce: flow.nonce, idTokenExpected: true });
      const idClaims = tokens.claims();
      if (!idClaims) throw new Error('no ID token');
      claims = { ...idClaims };
      if (config.serverMetadata().userinfo_endpoint) {
        const info = await client.fetchUserInfo(config, tokens.access_token, idClaims.sub);
        claims = { ...info, ...idClaims };
      }
    } catch (e) {
      this.o.logger?.warn({ issuer: this.cfg.issuer, reason: reason(e) }, "OIDC: the identity provider's answer could not be verified");
      throw new OidcFailure('sign_in_failed', `the identity provider's answer could not be verified (${reason(e)}): start again; if it keeps failing, tell the administrator`, flow.next);
    }
    return { claims, next: flow.next };
  }
}

const sameText = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** One line about an error, never a token or a secret (openid-client's messages name checks and codes). */
function reason(e: unknown): string {
  // The provider's OAuth error (ResponseBodyError: `error`; WWWAuthenticateChallengeError: its challenge's), else a failed fetch's cause.
  const err = e as { error?: unknown; error_description?: unknown; message?: unknown; cause?: unknown };
  const cause = (Array.isArray(err.cause) ? (err.cause[0] as { parameters?: unknown } | undefined)?.parameters : err.cause) as
    | { code?: unknown; message?: unknown; error?: unknown; error_description?: unknown }
    | undefined;
  const parts = [err.message, err.error ?? cause?.error, err.error_description ?? cause?.error_description, cause?.code ?? (cause?.error ? undefined : cause?.message)];
  return parts.filter((p) => typeof p === 'string' && p !== '').join(': ').slice(0, 300) || String(e);
}

/** The client secret: `client_secret`, or the first line of `client_secret_file`; throws a message for the operator. */
export async function readClientSecret(cfg: OidcConfig): Promise<string> {
  if (cfg.client_secret !== undefined) return cfg.client_secret;
  const file = cfg.client_secret_file!;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new Error(`oidc.client_secret_file: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)}); put the client secret the identity provider gave there`);
  }
  const secret = text.trim();
  if (!secret || /\s/.test(secret)) throw new Error(`oidc.client_secret_file: ${file} must hold the client secret alone, on one line`);
  return secret;
}
