/**
 * Authentication, the pure part: who a caller is, the token text format, the
 * shape of a stored token, user-name rules, and the `TokenVerifier` port the
 * HTTP layer asks. Hashing and the tokens file live in storage/tokens.ts.
 *
 * Token text: `fh_<id>_<secret>`, where `id` is 8 lower-case hex digits
 * (public: listed by the CLI, used to revoke, used as the rate-limit key) and
 * `secret` is 32 random bytes in base64url (43 characters). The prefix makes
 * a leaked token easy to recognise in a secret scanner.
 */
import { invalid } from './errors.js';
import type { Role } from './roles.js';

/** A caller whose token was accepted; the HTTP layer keeps it in `ctx.state.user`. */
export interface AuthUser {
  /** The user name the token was created for (`GET /api/v2/user` answers it as `login`). */
  login: string;
  /** The public id of the token used (never the secret). */
  tokenId: string;
  /**
   * The user's role now (read on every request, so a change applies at once).
   * Undefined where no roles are configured: the caller may do everything, as
   * before roles existed.
   */
  role?: Role;
}

/** What a verifier answers for an accepted token. */
export interface VerifiedToken {
  user: string;
  tokenId: string;
  /** The user's role now (looked up at each verify, never stored in the token); undefined: no roles configured. */
  role?: Role;
}

/**
 * Decides whether a presented token is valid now. Synchronous so that every
 * request sees the latest revocations without a queue; implementations keep
 * their lookup table in memory and refresh it cheaply.
 */
export interface TokenVerifier {
  /** The token's user and id, or undefined when it is malformed, unknown or revoked. */
  verify(token: string): VerifiedToken | undefined;
  /**
   * The token of this public id, when it is valid now: the portal's sessions in PostgreSQL name their token
   * by id and never keep it (src/farm/webSessions.ts). A verifier without it ends every token's session there.
   */
  verifyId?(tokenId: string): VerifiedToken | undefined;
  /** The users whose role is `admin` (named on the 403 page as whom to ask); optional. */
  admins?(): string[];
}

/** A token as stored: never the secret, only its hash. */
export interface StoredToken {
  /** 8 hex digits, public. */
  id: string;
  user: string;
  /** ISO 8601 creation time. */
  created: string;
  /** sha256 of the secret part, 64 lower-case hex digits. */
  hash: string;
}

export const TOKEN_PREFIX = 'fh_';
export const TOKEN_ID_RE = /^[0-9a-f]{8}$/;
const SECRET_RE = /^[A-Za-z0-9_-]{43}$/;
/** `fh_` + 8 hex + `_` + 43 base64url characters. The secret may itself contain `_`, so the id is fixed-width. */
const TOKEN_RE = /^fh_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$/;

/** Build the text handed to the user once. */
export function formatToken(id: string, secret: string): string {
  if (!TOKEN_ID_RE.test(id) || !SECRET_RE.test(secret)) throw new Error('formatToken: malformed id or secret');
  return `${TOKEN_PREFIX}${id}_${secret}`;
}

/** Split token text into its id and secret; undefined when it is not a farmhand token. */
export function parseToken(text: string): { id: string; secret: string } | undefined {
  const m = TOKEN_RE.exec(text);
  return m ? { id: m[1]!, secret: m[2]! } : undefined;
}

/**
 * User names: a letter or digit, then letters, digits, `.`, `_`, `@`, `-`;
 * at most 64. Wide enough for e-mail-like logins and CI account names, narrow
 * enough to print in a table, a log line or a reservation message safely.
 */
export const USER_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

export const isValidUserName = (name: string): boolean => USER_NAME_RE.test(name);

/** The name itself, or FarmError('invalid_request') saying what is allowed. */
export function checkUserName(name: string): string {
  if (!isValidUserName(name)) {
    throw invalid(
      `user name ${JSON.stringify(name)} is not allowed: use 1 to 64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit`,
    );
  }
  return name;
}
