/**
 * The tokens file, `<data_dir>/tokens.json`: the v2 access tokens, each
 * mapped to a user, stored as hashes. It is separate from state.json because
 * the `farmhand token` CLI writes it while the daemon runs: the CLI is its only
 * writer (`TokenStore`, atomic replace under a kernel file lock), the daemon only
 * reads it (`FileTokenVerifier`) and re-reads it when it changes, so a revoked
 * token is refused on its next request without a restart.
 *
 * Hashing: plain sha256, on purpose. Slow password hashes (scrypt, bcrypt)
 * exist to make guessing low-entropy passwords expensive; a token secret is
 * 256 random bits, which no amount of guessing reaches, so a slow hash would
 * add nothing but milliseconds of CPU per request (a denial-of-service lever
 * on a 2-core box). The hash only keeps the file from being a list of usable
 * credentials.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync, type BigIntStats } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { checkUserName, formatToken, isValidUserName, parseToken, TOKEN_ID_RE, type StoredToken, type TokenVerifier, type VerifiedToken } from '../core/auth.js';
import type { Logger } from '../core/ports.js';
import { ROLES, type Role } from '../core/roles.js';
import { writeFileAtomic } from './atomic.js';
import { lockFile, LockHeldError } from './dataDirLock.js';

/** Where the tokens of a data directory live. */
export const tokensFile = (dataDir: string): string => join(dataDir, 'tokens.json');

/** sha256 of a token's secret part. */
export const hashSecret = (secret: string): Buffer => createHash('sha256').update(secret, 'utf8').digest();

/** The tokens file cannot be read or is not what the CLI writes. */
export class TokenFileError extends Error {
  override readonly name = 'TokenFileError';
}

const entrySchema = z.strictObject({
  id: z.string().regex(TOKEN_ID_RE, '8 lower-case hex digits'),
  user: z.string().refine(isValidUserName, 'not a valid user name'),
  created: z.iso.datetime(),
  hash: z.string().regex(/^[0-9a-f]{64}$/, '64 lower-case hex digits (sha256)'),
});
/**
 * `roles`: each user's role (docs/auth.md, "Roles"). Optional, so every file written before roles existed
 * reads as it did: no `roles` (or an empty one) means no roles configured, and everyone signed in may do
 * everything. Once any user has a role, a user without one has the role `read`.
 */
const fileSchema = z.strictObject({
  version: z.literal(1),
  tokens: z.array(entrySchema),
  roles: z
    .record(z.string().refine(isValidUserName, 'not a valid user name'), z.enum(ROLES))
    .optional(),
});

/** The role of a user not named in a non-empty `roles`. */
export const UNLISTED_ROLE: Role = 'read';

/** The whole file: its tokens, and each user's role (empty: no roles configured). */
export interface TokensFileContent {
  tokens: StoredToken[];
  roles: Record<string, Role>;
}

/** Parse the file's text; throws TokenFileError naming the first problems. */
export function parseTokensFile(text: string, file = 'tokens.json'): StoredToken[] {
  return parseTokensFileContent(text, file).tokens;
}

/** The user's role under these roles: undefined when none are configured, `read` when the user is not named. */
export function roleIn(roles: Record<string, Role>, user: string, configured = Object.keys(roles).length > 0): Role | undefined {
  if (!configured) return undefined;
  return Object.hasOwn(roles, user) ? roles[user] : UNLISTED_ROLE;
}

/** Parse the file's text, roles included; throws TokenFileError naming the first problems. */
export function parseTokensFileContent(text: string, file = 'tokens.json'): TokensFileContent {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new TokenFileError(`${file}: not valid JSON (${(e as Error).message})`);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new TokenFileError(`${file}: ${problems.join('; ')}`);
  }
  const ids = new Set<string>();
  for (const t of parsed.data.tokens) {
    if (ids.has(t.id)) throw new TokenFileError(`${file}: token id ${t.id} appears twice`);
    ids.add(t.id);
  }
  return { tokens: parsed.data.tokens, roles: { ...parsed.data.roles } };
}

/** `roles` is written only when a user has one, so a node without roles keeps the file it always had. */
const serialize = (c: TokensFileContent) =>
  `${JSON.stringify({ version: 1, tokens: c.tokens, ...(Object.keys(c.roles).length > 0 && { roles: c.roles }) }, null, 2)}\n`;

export interface TokenStoreOptions {
  now?: () => Date;
  /** How long to wait for another `farmhand token` command's lock. */
  lockTimeoutMs?: number;
}

/**
 * The writer side, used by the CLI. Every change is read-modify-write under
 * a lock file, then an atomic replace, so two CLI runs at once cannot lose a
 * token and the daemon never reads half a file. A corrupt file is never
 * overwritten: that would silently drop every token in it.
 */
export class TokenStore {
  private readonly now: () => Date;
  private readonly lockTimeoutMs: number;

  constructor(
    readonly file: string,
    opts: TokenStoreOptions = {},
  ) {
    this.now = opts.now ?? (() => new Date());
    this.lockTimeoutMs = opts.lockTimeoutMs ?? 5000;
  }

  /** Every token, oldest first; a missing file has none. */
  async list(): Promise<StoredToken[]> {
    return (await this.read()).tokens;
  }

  /** The tokens and the users' roles; a missing file has neither. */
  async read(): Promise<TokensFileContent> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { tokens: [], roles: {} };
      throw new TokenFileError(`${this.file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
    }
    return parseTokensFileContent(text, this.file);
  }

  /**
   * Make a token for `user`; the returned text is the only copy of its secret. With `role`, the user's
   * role is set too (for all of the user's tokens: a role belongs to the user, not to a token).
   */
  async create(user: string, opts: { role?: Role } = {}): Promise<{ token: string; entry: StoredToken }> {
    checkUserName(user);
    await mkdir(dirname(this.file), { recursive: true });
    return this.locked(async () => {
      const c = await this.read();
      let id: string;
      do id = randomBytes(4).toString('hex');
      while (c.tokens.some((t) => t.id === id));
      const secret = randomBytes(32).toString('base64url');
      const entry: StoredToken = { id, user, created: this.now().toISOString(), hash: hashSecret(secret).toString('hex') };
      const roles = opts.role === undefined ? c.roles : { ...c.roles, [user]: opts.role };
      await writeFileAtomic(this.file, serialize({ tokens: [...c.tokens, entry], roles }), { keepMode: true });
      return { token: formatToken(id, secret), entry };
    });
  }

  /** Remove a token; the removed entry, or undefined when no token has that id. */
  async revoke(id: string): Promise<StoredToken | undefined> {
    return this.locked(async () => {
      const c = await this.read();
      const found = c.tokens.find((t) => t.id === id);
      if (found) await writeFileAtomic(this.file, serialize({ ...c, tokens: c.tokens.filter((t) => t !== found) }), { keepMode: true });
      return found;
    });
  }

  /**
   * Set (or with undefined, remove) a user's role. It applies to every token of the user on the next
   * request: the daemon looks the role up at each request. Returns the roles before and after.
   */
  async setRole(user: string, role: Role | undefined): Promise<{ before: Record<string, Role>; after: Record<string, Role> }> {
    checkUserName(user);
    await mkdir(dirname(this.file), { recursive: true });
    return this.locked(async () => {
      const c = await this.read();
      const after = { ...c.roles };
      if (role === undefined) delete after[user];
      else after[user] = role;
      await writeFileAtomic(this.file, serialize({ ...c, roles: after }), { keepMode: true });
      return { before: c.roles, after };
    });
  }

  /**
   * Serialise writers with a kernel lock on `.tokens.json.lock`: a command
   * that dies (even by SIGKILL) drops it, so it never blocks the next one.
   */
  private async locked<T>(fn: () => Promise<T>): Promise<T> {
    const file = join(dirname(this.file), `.${basename(this.file)}.lock`);
    let lock;
    try {
      lock = await lockFile(file, 'farmhand token', { waitMs: this.lockTimeoutMs });
    } catch (e) {
      if (!(e instanceof LockHeldError)) throw e;
      throw new TokenFileError(`${file} is held by another 'farmhand token' command (pid ${e.holderPid ?? 'unknown'}); try again once it has finished`);
    }
    try {
      return await fn();
    } finally {
      await lock.release();
    }
  }
}

/**
 * A file written within this long of when we read it may change again without
 * its inode, size and mtime all differing (timestamps are coarse, and a
 * rename frees an inode number the next temporary file can reuse). Like git's
 * "racily clean" index entries, such a version is re-read on every check
 * until it is older than this.
 */
const RACY_MS = 2000;

interface Known {
  user: string;
  hash: Buffer;
}



export interface VerifierOptions {
  /** The constant-time comparison; tests inject a spy. Default crypto.timingSafeEqual. */
  equal?: (a: Buffer, b: Buffer) => boolean;
  /** How the file is stat'ed; tests inject one to pin the change detection. */
  stat?: (file: string) => FileStat | undefined;
}

/** The fields of a bigint `fs.Stats` the change detection uses. */
export type FileStat = Pick<BigIntStats, 'ino' | 'size' | 'mtimeNs' | 'ctimeNs' | 'mtimeMs'>;

const statFile = (file: string): FileStat | undefined => statSync(file, { bigint: true, throwIfNoEntry: false });

/** The daemon's side: verifies tokens against the file as it is now. */
export class FileTokenVerifier implements TokenVerifier {
  private readonly equal: (a: Buffer, b: Buffer) => boolean;
  private readonly stat: (file: string) => FileStat | undefined;
  /** Compared against when the id is unknown, so both paths do the same work. */
  private readonly dummy = randomBytes(32);
  private readonly log: Logger;
  private seen: string | undefined;
  private racy = true;
  private text: string | undefined;
  /** undefined while the file is unreadable or corrupt: every token is refused. */
  private tokens: Map<string, Known> | undefined = new Map();
  /** The users' roles; empty: no roles configured. */
  private roles = new Map<string, Role>();
  private problem: string | undefined;
  /** The file version last reported as unusable, so each is logged once. */
  private failedKey: string | undefined;

  constructor(
    readonly file: string,
    logger: Logger,
    opts: VerifierOptions = {},
  ) {
    this.equal = opts.equal ?? timingSafeEqual;
    this.stat = opts.stat ?? statFile;
    this.log = logger.child({ module: 'tokens' });
  }

  verify(token: string): VerifiedToken | undefined {
    // The format is public, so refusing a malformed token early reveals nothing.
    const t = parseToken(token);
    if (!t) return undefined;
    this.refresh();
    if (!this.tokens) return undefined;
    const known = this.tokens.get(t.id);
    const same = this.equal(hashSecret(t.secret), known?.hash ?? this.dummy);
    if (!same || !known) return undefined;
    // The user's role as the file says now (read at each verify, so a change applies at once); none when no roles are configured.
    if (this.roles.size === 0) return { user: known.user, tokenId: t.id };
    return { user: known.user, tokenId: t.id, role: this.roles.get(known.user) ?? UNLISTED_ROLE };
  }

  /** The users with the role `admin` now, sorted (the 403 page names them as whom to ask). */
  admins(): string[] {
    this.refresh();
    return [...this.roles].filter(([, r]) => r === 'admin').map(([u]) => u).sort();
  }

  /** For health reports and tests: whether tokens are being accepted, and how many exist. */
  status(): { ok: boolean; count: number; roles: number; problem?: string } {
    this.refresh();
    return this.tokens ? { ok: true, count: this.tokens.size, roles: this.roles.size } : { ok: false, count: 0, roles: 0, problem: this.problem! };
  }

  /** One stat per check; the file is read again only when it changed (or may have). */
  private refresh(): void {
    let st;
    try {
      st = this.stat(this.file);
    } catch (e) {
      return this.fail(`cannot stat (${(e as NodeJS.ErrnoException).code ?? String(e)})`, 'stat-error', true);
    }
    if (!st) return this.load(undefined, 'missing', false);
    const key = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    if (key === this.seen && !this.racy) return;
    const readAt = Date.now();
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return this.load(undefined, 'missing', false);
      return this.fail(`cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`, key, true);
    }
    this.load(text, key, readAt - Number(st.mtimeMs) < RACY_MS);
  }

  private load(text: string | undefined, key: string, racy: boolean): void {
    this.seen = key;
    this.racy = racy;
    if (this.problem === undefined && text === this.text) return; // same content: the table is current
    this.text = text;
    let tokens: StoredToken[];
    let roles: Record<string, Role>;
    try {
      ({ tokens, roles } = text === undefined ? { tokens: [], roles: {} } : parseTokensFileContent(text, this.file));
    } catch (e) {
      return this.fail((e as Error).message, key, racy);
    }
    this.roles = new Map(Object.entries(roles));
    if (this.problem !== undefined) this.log.warn({ file: this.file, tokens: tokens.length }, 'tokens file is usable again; tokens are accepted');
    this.problem = undefined;
    this.tokens = new Map(tokens.map((t) => [t.id, { user: t.user, hash: Buffer.from(t.hash, 'hex') }]));
  }

  /**
   * Refuse every token, and say so loudly, once per broken version of the
   * file. `retry`: check the file again on every request (it was unreadable,
   * or may change unseen), rather than only when its stat changes.
   */
  private fail(problem: string, key: string, retry: boolean): void {
    const changed = this.problem !== problem || this.failedKey !== key;
    this.failedKey = key;
    this.seen = key;
    this.racy = retry;
    this.tokens = undefined;
    this.problem = problem;
    if (changed) {
      this.log.error(
        { file: this.file, problem },
        'tokens file is unusable: EVERY v2 token is refused until it is fixed (repair it, or delete it and create tokens again)',
      );
    }
  }
}
