/**
 * People's sign-in sessions on the portal, in PostgreSQL (`web_sessions`, migration 11; docs/auth.md,
 * "Sessions", docs/farm.md, "Many portals"): every replica sees every session, and a portal restart
 * signs nobody out. The node keeps its sessions in memory (src/http/session.ts `SessionStore`); both
 * answer the same `WebSessionStore` interface, with the same rules: idle and absolute expiry, a cap
 * per user, a token's session ending with its token, a role change applying at the next request.
 *
 * - Only the sha256 of the session id (the cookie's value) is stored, never the id; a token's
 *   session stores the token's public id, never the token. Its validity and its user's role are the
 *   verifier's word at each use (`TokenVerifier.verifyId`, from memory, reloaded on NOTIFY).
 * - Each request with a session cookie costs one read of one row by its primary key, and a write
 *   of `last_used_at` at most once every `touchSecs` (default 60 s: idle expiry is 12 h). No cache:
 *   a session ended on any replica (sign-out, a cap, expiry) is refused on every replica from the
 *   commit of its DELETE on, with nothing to invalidate.
 * - Held connections (event streams) ask `isLive` synchronously: the sessions this replica answered
 *   are kept in memory (bounded), and a DELETE of their row is told to every replica by the
 *   trigger's NOTIFY on the `farmhand` channel (src/farm/wakeups.ts), which ends them at once. After
 *   the LISTEN connection comes back, the remembered sessions are checked against the table.
 */
import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { TokenVerifier } from '../core/auth.js';
import type { Logger } from '../core/ports.js';
import { isRole } from '../core/roles.js';
import { SESSION_IDLE_MS, SESSION_LIMIT, SESSION_MAX_MS, SESSIONS_PER_USER, type OidcIdentity, type Session, type WebSessionStore } from '../http/session.js';
import type { FarmWakeups } from './wakeups.js';

export interface PgSessionStoreOptions {
  pool: pg.Pool;
  tokens: TokenVerifier;
  /** The farmhand channel: sessions ended on another replica end their held connections here. */
  wakeups?: FarmWakeups | undefined;
  logger?: Logger | undefined;
  /** `last_used_at` is written at most this often per session (default 60). */
  touchSecs?: number;
  /** Expired sessions are deleted at start and this often (default 600). */
  pruneSecs?: number;
}

interface Known {
  session: Session;
  origin: 'token' | 'oidc';
  /** The token's public id (origin token). */
  tokenId?: string;
}

interface Row {
  username: string;
  origin: 'token' | 'oidc';
  token_id: string | null;
  role: string | null;
  csrf: string;
  created_ms: number;
  last_used_ms: number;
  expires_ms: number;
  now_ms: number;
}

const newSecret = (): string => randomBytes(32).toString('base64url');
const hashOf = (id: string): Buffer => createHash('sha256').update(id, 'utf8').digest();
const ms = (col: string) => `(extract(epoch FROM ${col}) * 1000)::float8`;

export class PgSessionStore implements WebSessionStore {
  /** The sessions this replica answered, by the hex of their hash; insertion order is last-use order. */
  private readonly known = new Map<string, Known>();
  private readonly endListeners: ((s: Session) => void)[] = [];
  private readonly touchMs: number;
  private pruner: NodeJS.Timeout | undefined;
  private readonly unsubscribe: (() => void)[] = [];

  constructor(private readonly o: PgSessionStoreOptions) {
    this.touchMs = (o.touchSecs ?? 60) * 1000;
  }

  /** Prune once, then every `pruneSecs`; follow sessions ended on other replicas. */
  async start(): Promise<void> {
    const w = this.o.wakeups;
    if (w) {
      this.unsubscribe.push(w.on('session_ended', (n) => typeof n.hash === 'string' && this.forget(n.hash)));
      this.unsubscribe.push(w.on('resync', () => void this.recheck().catch((err: unknown) => this.o.logger?.warn({ err }, 'sessions: checking held sessions failed'))));
    }
    await this.prune();
    this.pruner = setInterval(() => {
      if (this.o.pool.ending) return;
      this.prune().catch((err: unknown) => this.o.logger?.warn({ err }, 'sessions: pruning expired sessions failed; tried again later'));
    }, (this.o.pruneSecs ?? 600) * 1000);
    this.pruner.unref();
  }

  close(): void {
    clearInterval(this.pruner);
    for (const u of this.unsubscribe.splice(0)) u();
  }

  async create(token: string): Promise<Session | undefined> {
    const found = this.o.tokens.verify(token);
    if (!found) return undefined;
    return this.insert({ login: found.user, tokenId: found.tokenId, origin: 'token', role: found.role, maxMs: SESSION_MAX_MS });
  }

  createOidc(who: OidcIdentity): Promise<Session> {
    return this.insert({ login: who.login, tokenId: `oidc:${who.login}`, origin: 'oidc', role: who.role, maxMs: Math.min(who.maxMs, SESSION_MAX_MS) });
  }

  private async insert(n: { login: string; tokenId: string; origin: 'token' | 'oidc'; role: Session['role']; maxMs: number }): Promise<Session> {
    const id = newSecret();
    const csrf = newSecret();
    const { rows } = await this.o.pool.query<{ created_ms: number }>(
      `INSERT INTO web_sessions (id_hash, username, origin, token_id, role, csrf, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7::double precision / 1000))
       RETURNING ${ms('created_at')} AS created_ms`,
      [hashOf(id), n.login, n.origin, n.origin === 'token' ? n.tokenId : null, n.role ?? null, csrf, n.maxMs],
    );
    // At most SESSIONS_PER_USER of one person: their least recently used ones end (the trigger tells every replica).
    await this.o.pool.query(
      `DELETE FROM web_sessions WHERE id_hash IN (
         SELECT id_hash FROM web_sessions WHERE username = $1 ORDER BY last_used_at DESC, created_at DESC OFFSET $2)`,
      [n.login, SESSIONS_PER_USER],
    );
    const t = Number(rows[0]!.created_ms);
    const s: Session = { id, login: n.login, tokenId: n.tokenId, csrf, created: t, lastSeen: t, maxMs: n.maxMs, ...(n.role !== undefined && { role: n.role }) };
    this.remember(hashOf(id).toString('hex'), { session: s, origin: n.origin, ...(n.origin === 'token' && { tokenId: n.tokenId }) });
    return s;
  }

  async get(id: string | undefined): Promise<Session | undefined> {
    if (!id) return undefined;
    const hash = hashOf(id);
    const hex = hash.toString('hex');
    const { rows } = await this.o.pool.query<Row>(
      `SELECT username, origin, token_id, role, csrf, ${ms('created_at')} AS created_ms, ${ms('last_used_at')} AS last_used_ms,
              ${ms('expires_at')} AS expires_ms, ${ms('now()')} AS now_ms
         FROM web_sessions WHERE id_hash = $1`,
      [hash],
    );
    const r = rows[0];
    if (!r) {
      this.forget(hex);
      return undefined;
    }
    const now = Number(r.now_ms);
    let role: Session['role'];
    if (now >= Number(r.expires_ms) || now - Number(r.last_used_ms) > SESSION_IDLE_MS) return this.drop(hash);
    if (r.origin === 'token') {
      // The token's word now: revoked, expired or its user removed ends the session; a role change applies.
      const t = this.o.tokens.verifyId?.(r.token_id!);
      if (!t || t.user !== r.username) return this.drop(hash);
      role = t.role;
    } else {
      // A role the code does not know (a newer portal's) fails closed: read only.
      role = r.role === null ? undefined : isRole(r.role) ? r.role : 'read';
    }
    let lastUsed = Number(r.last_used_ms);
    if (now - lastUsed >= this.touchMs) {
      await this.o.pool.query('UPDATE web_sessions SET last_used_at = now() WHERE id_hash = $1', [hash]);
      lastUsed = now;
    }
    const prev = this.known.get(hex);
    const s: Session = prev?.session ?? { id, login: r.username, tokenId: r.origin === 'token' ? r.token_id! : `oidc:${r.username}`, csrf: r.csrf, created: 0, lastSeen: 0 };
    s.created = Number(r.created_ms);
    s.maxMs = Number(r.expires_ms) - s.created;
    s.lastSeen = lastUsed;
    if (role === undefined) delete s.role;
    else s.role = role;
    this.known.delete(hex);
    this.remember(hex, { session: s, origin: r.origin, ...(r.token_id !== null && { tokenId: r.token_id }) });
    return s;
  }

  /** Sign-out: the row goes (every replica refuses the cookie from the commit on; the trigger ends held connections). */
  async end(id: string): Promise<void> {
    await this.drop(hashOf(id));
  }

  isLive(s: Session): boolean {
    const k = this.known.get(hashOf(s.id).toString('hex'));
    if (k?.session !== s) return false;
    const now = Date.now();
    if (now - s.created >= (s.maxMs ?? SESSION_MAX_MS) || now - s.lastSeen > SESSION_IDLE_MS) return false;
    if (k.origin !== 'token') return true;
    const t = this.o.tokens.verifyId?.(k.tokenId!);
    return !!t && t.user === s.login;
  }

  onEnd(fn: (s: Session) => void): void {
    this.endListeners.push(fn);
  }

  /** Delete expired and idle sessions; returns how many. */
  async prune(): Promise<number> {
    const { rowCount } = await this.o.pool.query(
      `DELETE FROM web_sessions WHERE expires_at <= now() OR last_used_at <= now() - make_interval(secs => $1::double precision / 1000)`,
      [SESSION_IDLE_MS],
    );
    return rowCount ?? 0;
  }

  /** Sessions remembered here (held connections may hold them). */
  get size(): number {
    return this.known.size;
  }

  private async drop(hash: Buffer): Promise<undefined> {
    await this.o.pool.query('DELETE FROM web_sessions WHERE id_hash = $1', [hash]);
    this.forget(hash.toString('hex'));
    return undefined;
  }

  private remember(hex: string, k: Known): void {
    this.known.set(hex, k);
    // Bounded: the least recently used is forgotten here (its row stays; its next request reads it again).
    while (this.known.size > SESSION_LIMIT) this.known.delete(this.known.keys().next().value as string);
  }

  /** The session ended (here or on another replica): its held connections end. */
  private forget(hex: string): void {
    const k = this.known.get(hex);
    if (!k) return;
    this.known.delete(hex);
    for (const fn of this.endListeners) fn(k.session);
  }

  /** After the LISTEN connection came back: forget the remembered sessions whose rows are gone. */
  private async recheck(): Promise<void> {
    const hexes = [...this.known.keys()];
    if (!hexes.length) return;
    const { rows } = await this.o.pool.query<{ h: string }>(
      `SELECT encode(id_hash, 'hex') AS h FROM web_sessions WHERE id_hash = ANY($1::bytea[])`,
      [hexes.map((h) => Buffer.from(h, 'hex'))],
    );
    const alive = new Set(rows.map((r) => r.h));
    for (const h of hexes) if (!alive.has(h)) this.forget(h);
  }
}
