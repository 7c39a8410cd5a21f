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
const fileSchema = z.strictObject({ version: z.literal(1), tokens: z.array(entrySchema) });

/** Parse the file's text; throws TokenFileError naming the first problems. */
export function parseTokensFile(text: string, file = 'tokens.json'): StoredToken[] {
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
  return parsed.data.tokens;
}

const serialize = (tokens: StoredToken[]) => `${JSON.stringify({ version: 1, tokens }, null, 2)}\n`;

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
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new TokenFileError(`${this.file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
    }
    return parseTokensFile(text, this.file);
  }

  /** Make a token for `user`; the returned text is the only copy of its secret. */
  async create(user: string): Promise<{ token: string; entry: StoredToken }> {
    checkUserName(user);
    await mkdir(dirname(this.file), { recursive: true });
    return this.locked(async () => {
      const tokens = await this.list();
      let id: string;
      do id = randomBytes(4).toString('hex');
      while (tokens.some((t) => t.id === id));
      const secret = randomBytes(32).toString('base64url');
      const entry: StoredToken = { id, user, created: this.now().toISOString(), hash: hashSecret(secret).toString('hex') };
      await writeFileAtomic(this.file, serialize([...tokens, entry]), { keepMode: true });
      return { token: formatToken(id, secret), entry };
    });
  }

  /** Remove a token; the removed entry, or undefined when no token has that id. */
  async revoke(id: string): Promise<StoredToken | undefined> {
    return this.locked(async () => {
      const tokens = await this.list();
      const found = tokens.find((t) => t.id === id);
      if (found) await writeFileAtomic(this.file, serialize(tokens.filter((t) => t !== found)), { keepMode: true });
      return found;
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
    return same && known ? { user: known.user, tokenId: t.id } : undefined;
  }

  /** For health reports and tests: whether tokens are being accepted, and how many exist. */
  status(): { ok: boolean; count: number; problem?: string } {
    this.refresh();
    return this.tokens ? { ok: true, count: this.tokens.size } : { ok: false, count: 0, problem: this.problem! };
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
    try {
      tokens = text === undefined ? [] : parseTokensFile(text, this.file);
    } catch (e) {
      return this.fail((e as Error).message, key, racy);
    }
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
