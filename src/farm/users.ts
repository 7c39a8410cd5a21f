/**
 * The farm's people and their v2 tokens, in PostgreSQL (docs/farm.md, "People, tokens and node
 * credentials"):
 *
 * - `PgUsers`: add, list, remove users (`users`); removing one removes its tokens (ON DELETE CASCADE).
 * - `PgTokens`: make a token (its text is returned once, in the node's format `fh_<id>_<secret>`,
 *   src/core/auth.ts), list, revoke. Only the sha256 of the secret is stored, hashed as the node's
 *   tokens file hashes it (src/storage/tokens.ts `hashSecret`).
 * - `PgTokenVerifier`: the portal's `FarmTokenVerifier`. `verify()` is synchronous, from a map in
 *   memory; the map is loaded at `start()`, reloaded when PostgreSQL notifies a change (a trigger on
 *   `tokens` and `users`, migration 3), reloaded after the LISTEN connection comes back, and reloaded
 *   every `reloadSecs` whatever happens, so a revocation is honoured within milliseconds normally and
 *   within `reloadSecs` (default 30 s) in the worst case while the database is reachable.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { checkUserName, formatToken, parseToken, TOKEN_ID_RE, type VerifiedToken } from '../core/auth.js';
import { FarmError, notFound } from '../core/errors.js';
import { isRole, ROLES, type Role } from '../core/roles.js';
import type { Logger } from '../core/ports.js';
import { hashSecret } from '../storage/tokens.js';
import type { NewAuditEntry } from '../core/audit.js';
import type { FarmTokenVerifier } from './contract.js';
import { insertAuditEntries } from './audit.js';
import { inTransaction } from './db/pool.js';

/** The channel the identity trigger (migration 3) notifies on. */
export const TOKENS_CHANNEL = 'farm_tokens';

const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';
const pgCode = (e: unknown): string | undefined => (e as { code?: unknown }).code as string | undefined;

export interface FarmUser {
  username: string;
  role: Role;
  /** ISO 8601. */
  created: string;
  /** Tokens not revoked (expired ones included). */
  tokens: number;
}

/** The role of a user added without one (users of a farm from before roles became admins: migration 8). */
export const DEFAULT_FARM_ROLE: Role = 'run';

function checkRole(role: string): asserts role is Role {
  if (!isRole(role)) throw new FarmError('invalid_request', `role ${JSON.stringify(role)} is not one of ${ROLES.join(', ')}`);
}

export class PgUsers {
  constructor(private readonly pool: pg.Pool) {}

  /** Add a user; FarmError('conflict') when the name is taken, 'invalid_request' when it is not allowed. */
  async add(username: string, role: Role = DEFAULT_FARM_ROLE): Promise<FarmUser> {
    checkUserName(username);
    checkRole(role);
    try {
      const { rows } = await this.pool.query<{ created_at: Date }>('INSERT INTO users (username, role) VALUES ($1, $2) RETURNING created_at', [username, role]);
      return { username, role, created: rows[0]!.created_at.toISOString(), tokens: 0 };
    } catch (e) {
      if (pgCode(e) === UNIQUE_VIOLATION) throw new FarmError('conflict', `user ${username} already exists`);
      throw e;
    }
  }

  async list(): Promise<FarmUser[]> {
    const { rows } = await this.pool.query<{ username: string; role: string; created_at: Date; tokens: string }>(
      `SELECT u.username, u.role, u.created_at, count(t.token_id) FILTER (WHERE t.revoked_at IS NULL) AS tokens
         FROM users u LEFT JOIN tokens t USING (username) GROUP BY u.username ORDER BY u.username`,
    );
    return rows.map((r) => ({ username: r.username, role: isRole(r.role) ? r.role : 'read', created: r.created_at.toISOString(), tokens: Number(r.tokens) }));
  }

  async get(username: string): Promise<FarmUser | undefined> {
    return (await this.list()).find((u) => u.username === username);
  }

  /**
   * Change a user's role. It applies to the user's tokens and sessions at once: the portal's verifier is told
   * by the users trigger (migration 3) and reloads. Returns the role before; FarmError('not_found') for no user.
   */
  async setRole(username: string, role: Role): Promise<{ before: Role; after: Role }> {
    checkRole(role);
    const { rows } = await this.pool.query<{ before: string }>(
      'UPDATE users u SET role = $2 FROM users prev WHERE u.username = $1 AND prev.username = u.username RETURNING prev.role AS before',
      [username, role],
    );
    if (!rows[0]) throw notFound(`no user ${username}`);
    return { before: isRole(rows[0].before) ? rows[0].before : 'read', after: role };
  }

  /**
   * Record a person the identity provider signed in (docs/auth.md, "Sign-in with OpenID Connect"):
   * added on the first sign-in with `role`. Later sign-ins: with `providerDecides` (the config maps a
   * role claim) the provider's role replaces the stored one; without, the stored role stays (the farm
   * administrator's), unless it is not a role at all (a user added before roles: `role`). Answers the
   * role the session gets.
   *
   * A sign-in that changes an existing user's role writes `user.role` to the audit trail in the same
   * transaction (who: the user; via: `oidc`; detail: before, after, and the identity provider that
   * decided), as `farmhand farm user role` does; one that changes nothing writes nothing.
   */
  async signedInWithOidc(username: string, role: Role, providerDecides: boolean, seen: OidcSignInSeen = {}): Promise<Role> {
    checkUserName(username);
    return inTransaction(this.pool, async (db) => {
      // The row locked first, so that the role read here is the one this sign-in replaces.
      const prev = await db.query<{ role: string }>('SELECT role FROM users WHERE username = $1 FOR UPDATE', [username]);
      const { rows } = await db.query<{ role: string }>(
        `INSERT INTO users (username, role) VALUES ($1, $2)
         ON CONFLICT (username) DO UPDATE SET role = CASE WHEN $3 OR NOT (users.role = ANY($4)) THEN EXCLUDED.role ELSE users.role END
         RETURNING role`,
        [username, role, providerDecides, [...ROLES]],
      );
      const stored = rows[0]!.role;
      const after = isRole(stored) ? stored : role;
      const was = prev.rows[0]?.role;
      if (was !== undefined) {
        // As setRole reports it: a stored value that is not a role read as `read`.
        const before = isRole(was) ? was : 'read';
        if (was !== stored) await insertAuditEntries(db, [oidcRoleEntry(username, before, after, seen)]);
      }
      return after;
    });
  }

  /** Remove a user and (cascade) every token of it; FarmError('not_found') when there is none. */
  async remove(username: string): Promise<void> {
    const { rowCount } = await this.pool.query('DELETE FROM users WHERE username = $1', [username]);
    if (!rowCount) throw notFound(`no user ${username}`);
  }
}

export interface FarmToken {
  /** 8 hex digits, public. */
  id: string;
  user: string;
  /** ISO 8601. */
  created: string;
  /** ISO 8601, or null when it never expires. */
  expires: string | null;
  /** ISO 8601, or null while valid. */
  revoked: string | null;
}

interface TokenRow {
  token_id: string;
  username: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
}

const toToken = (r: TokenRow): FarmToken => ({
  id: r.token_id,
  user: r.username,
  created: r.created_at.toISOString(),
  expires: r.expires_at?.toISOString() ?? null,
  revoked: r.revoked_at?.toISOString() ?? null,
});

export interface CreateTokenOptions {
  /** The token stops working this many seconds after it is made; default never. */
  expiresInSecs?: number;
}

/** What the portal saw of an OpenID Connect sign-in, for its audit entry. */
export interface OidcSignInSeen {
  /** The address the person's browser came from. */
  from?: string | null;
  /** The identity provider's issuer URL (`oidc.issuer`). */
  issuer?: string;
}

/** The `user.role` entry of a role the identity provider changed at a sign-in. */
function oidcRoleEntry(username: string, before: Role, after: Role, seen: OidcSignInSeen): NewAuditEntry {
  return {
    at: new Date().toISOString(),
    who: username,
    via: 'oidc',
    token_id: null,
    from: seen.from ?? null,
    action: 'user.role',
    node: null,
    target: username,
    detail: { before, after, by: 'identity provider', ...(seen.issuer !== undefined && { issuer: seen.issuer }) },
    outcome: 200,
  };
}

export class PgTokens {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Make a token for an existing user. The returned `token` is the only copy of its secret; the
   * table keeps the sha256 of the secret. FarmError('not_found') when the user does not exist.
   */
  async createToken(user: string, opts: CreateTokenOptions = {}): Promise<{ token: string; entry: FarmToken }> {
    checkUserName(user);
    const secret = randomBytes(32).toString('base64url');
    const hash = hashSecret(secret).toString('hex');
    // 32-bit ids: a collision is rare but possible; the unique constraint catches it and we draw again.
    for (let attempt = 0; ; attempt++) {
      const id = randomBytes(4).toString('hex');
      try {
        const { rows } = await this.pool.query<TokenRow>(
          `INSERT INTO tokens (token_id, token_hash, username, expires_at)
           VALUES ($1, $2, $3, CASE WHEN $4::double precision IS NULL THEN NULL ELSE now() + make_interval(secs => $4) END)
           RETURNING token_id, username, created_at, expires_at, revoked_at`,
          [id, hash, user, opts.expiresInSecs ?? null],
        );
        return { token: formatToken(id, secret), entry: toToken(rows[0]!) };
      } catch (e) {
        if (pgCode(e) === FOREIGN_KEY_VIOLATION) throw notFound(`no user ${user} (add it first: farmhand farm user add ${user})`);
        if (pgCode(e) === UNIQUE_VIOLATION && attempt < 5) continue;
        throw e;
      }
    }
  }

  /** Every token (revoked ones too, for the record), oldest first. Never a secret: the table has none. */
  async list(): Promise<FarmToken[]> {
    const { rows } = await this.pool.query<TokenRow>(
      'SELECT token_id, username, created_at, expires_at, revoked_at FROM tokens ORDER BY created_at, token_id',
    );
    return rows.map(toToken);
  }

  /**
   * Revoke a token by id (or given the whole token text). The row stays, marked revoked, so the list
   * still says whose it was. FarmError('not_found') for an unknown or already revoked id.
   */
  async revoke(idOrToken: string): Promise<FarmToken> {
    const id = parseToken(idOrToken)?.id ?? idOrToken;
    if (!TOKEN_ID_RE.test(id)) throw new FarmError('invalid_request', `${JSON.stringify(idOrToken)} is not a token id (8 hex digits, as the token list shows)`);
    const { rows } = await this.pool.query<TokenRow>(
      `UPDATE tokens SET revoked_at = now() WHERE token_id = $1 AND revoked_at IS NULL
       RETURNING token_id, username, created_at, expires_at, revoked_at`,
      [id],
    );
    if (!rows[0]) throw notFound(`no valid token with id ${id}`);
    return toToken(rows[0]);
  }
}

interface Known {
  user: string;
  hash: Buffer;
  role: Role;
  /** Epoch ms, or Infinity. */
  expires: number;
}

export interface PgTokenVerifierOptions {
  logger?: Logger;
  /** Full reload period, the bound on a missed notification (default 30). */
  reloadSecs?: number;
  /** First delay before reconnecting the LISTEN connection; doubles up to `maxRetryMs` (default 500). */
  retryMs?: number;
  maxRetryMs?: number;
  /** Tests inject a spy; default crypto.timingSafeEqual. */
  equal?: (a: Buffer, b: Buffer) => boolean;
  now?: () => number;
}

/**
 * `verify()` answers from memory. One pooled connection is held for LISTEN; when it drops, the
 * verifier reconnects with back-off and reloads (notifications sent meanwhile are lost, the reload
 * covers them). Until `start()` resolves every token is refused. When the database cannot be
 * reached the last loaded table stays in use: tokens cannot be revoked then either, since a
 * revocation is a row in that database.
 */
export class PgTokenVerifier implements FarmTokenVerifier {
  private tokens = new Map<string, Known>();
  private readonly dummy = randomBytes(32);
  private readonly log: Logger | undefined;
  private readonly reloadMs: number;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly equal: (a: Buffer, b: Buffer) => boolean;
  private readonly now: () => number;
  private listener: { client: pg.PoolClient; release: () => boolean } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The reload running now, and whether another must follow it (a change came in meanwhile). */
  private loading: Promise<void> | undefined;
  private again = false;
  /** How many reloads completed; tests wait on it. */
  reloads = 0;

  constructor(
    private readonly pool: pg.Pool,
    opts: PgTokenVerifierOptions = {},
  ) {
    this.log = opts.logger?.child({ module: 'farm-tokens' });
    this.reloadMs = (opts.reloadSecs ?? 30) * 1000;
    this.retryMs = opts.retryMs ?? 500;
    this.maxRetryMs = opts.maxRetryMs ?? 10_000;
    this.equal = opts.equal ?? timingSafeEqual;
    this.now = opts.now ?? Date.now;
  }

  verify(token: string): VerifiedToken | undefined {
    // The format is public, so refusing a malformed token early reveals nothing.
    const t = parseToken(token);
    if (!t) return undefined;
    const known = this.tokens.get(t.id);
    const same = this.equal(hashSecret(t.secret), known?.hash ?? this.dummy);
    return same && known && known.expires > this.now() ? { user: known.user, tokenId: t.id, role: known.role } : undefined;
  }

  verifyId(tokenId: string): VerifiedToken | undefined {
    const known = this.tokens.get(tokenId);
    return known && known.expires > this.now() ? { user: known.user, tokenId, role: known.role } : undefined;
  }

  /** LISTEN first, then load: a change committed between the two is either loaded or notified. */
  async start(): Promise<void> {
    await this.listen();
    await this.reload();
    this.timer = setInterval(() => {
      if (this.pool.ending) return;
      this.reload().catch((e: unknown) => this.log?.warn({ err: e }, 'periodic token reload failed; keeping the last table'));
    }, this.reloadMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.retryTimer);
    const l = this.listener;
    this.listener = undefined;
    l?.release();
    await this.loading?.catch(() => undefined);
  }

  /** Whether the LISTEN connection is up (for health reports and tests). */
  get listening(): boolean {
    return this.listener !== undefined;
  }

  /** Read the whole table again; concurrent calls share one reload and schedule at most one more. */
  reload(): Promise<void> {
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    this.loading = (async () => {
      try {
        do {
          this.again = false;
          await this.loadOnce();
        } while (this.again && !this.closed);
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  private async loadOnce(): Promise<void> {
    // The user's role with each token: a role change (an UPDATE of users) notifies and reloads, so it applies at once.
    const { rows } = await this.pool.query<{ token_id: string; username: string; token_hash: string; expires_ms: number | null; role: string }>(
      `SELECT t.token_id, t.username, t.token_hash, extract(epoch FROM t.expires_at) * 1000 AS expires_ms, u.role
         FROM tokens t JOIN users u USING (username)
        WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
    );
    this.tokens = new Map(
      rows.map((r) => [
        r.token_id,
        // A role the code does not know (a newer portal's) fails closed: read only.
        { user: r.username, hash: Buffer.from(r.token_hash, 'hex'), expires: r.expires_ms === null ? Infinity : Number(r.expires_ms), role: isRole(r.role) ? r.role : 'read' },
      ]),
    );
    this.reloads++;
  }

  private async listen(): Promise<void> {
    const client = await this.pool.connect();
    let released = false;
    const onNotification = (n: pg.Notification) => {
      if (n.channel === TOKENS_CHANNEL) void this.reload().catch((e: unknown) => this.log?.warn({ err: e }, 'token reload after a notification failed; the periodic reload will retry'));
    };
    const release = () => {
      if (released) return false;
      released = true;
      client.off('error', onDrop).off('end', onEnd).off('notification', onNotification);
      // Destroy it: a LISTENing (or broken) connection must never go back to the pool.
      client.release(true);
      return true;
    };
    const onDrop = (err?: Error) => {
      const wasUp = this.listener?.client === client;
      if (wasUp) this.listener = undefined;
      // A pool being ended (the portal stopping without close() first) is no reason to reconnect.
      if (!release() || !wasUp || this.closed || this.pool.ending) return;
      this.log?.warn({ err }, 'token change notifications lost (LISTEN connection dropped); reconnecting');
      this.reconnect(this.retryMs);
    };
    const onEnd = () => onDrop();
    // A checked-out client with no 'error' listener would take the process down when the server goes.
    client.on('error', onDrop).on('end', onEnd).on('notification', onNotification);
    try {
      await client.query(`LISTEN ${TOKENS_CHANNEL}`);
    } catch (e) {
      release();
      throw e;
    }
    if (this.closed) {
      release();
      return;
    }
    this.listener = { client, release };
  }

  private reconnect(delay: number): void {
    // Jitter, so several portals do not all come back at the same instant.
    this.retryTimer = setTimeout(() => {
      if (this.closed || this.pool.ending) return;
      this.listen().then(
        () => {
          this.log?.info({}, 'token change notifications back; reloading');
          return this.reload();
        },
        () => this.reconnect(Math.min(delay * 2, this.maxRetryMs)),
      ).catch((e: unknown) => this.log?.warn({ err: e }, 'token reload after reconnecting failed; the periodic reload will retry'));
    }, delay * (0.5 + Math.random() / 2));
    this.retryTimer.unref();
  }
}
