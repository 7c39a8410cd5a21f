/**
 * Thin access to one git repository through the git command line: every call
 * is `git --git-dir=<repo> ...` with arguments as an array (no shell), in a
 * scrubbed environment (no inherited GIT_* variables, no password prompts).
 */
import { FarmError } from '../core/errors.js';
import { execCommand, type ExecOptions, type ExecResult } from './exec.js';

/** The environment git runs in: the daemon's, minus GIT_* overrides, never prompting. */
export function gitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GIT_')) env[k] = v;
  return { ...env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', ...extra };
}

/** Options of one git command; `env` adds variables to the scrubbed environment. */
export type GitOptions = Omit<ExecOptions, 'env'> & { env?: Record<string, string> };

export class GitError extends FarmError {
  constructor(
    readonly args: readonly string[],
    readonly result: ExecResult,
  ) {
    super('internal', `git ${args[0] ?? ''} failed: ${gitReason(result)}`);
  }
}

/** Longest stderr kept in a message; git's reasons are a few lines. */
const MAX_REASON = 4000;

/**
 * Why a git command failed, in git's own words: every non-blank line of its
 * stderr, joined on one line. The first line is usually the reason ("'x'
 * does not appear to be a git repository"); the later ones the advice.
 */
export function gitReason(result: ExecResult): string {
  if (result.spawnError) return result.spawnError.message;
  if (result.timedOut) return 'timed out';
  const why = result.stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join(' / ');
  return (why.length > MAX_REASON ? `${why.slice(0, MAX_REASON)}...` : why) || `exit status ${String(result.code)}`;
}

export class GitRepo {
  constructor(
    readonly gitDir: string,
    private readonly git = 'git',
  ) {}

  /** Run a git command; resolves with its result whatever the exit status. */
  exec(args: readonly string[], opts: GitOptions = {}): Promise<ExecResult> {
    return execCommand(this.git, [`--git-dir=${this.gitDir}`, ...args], { ...opts, env: gitEnv(opts.env) });
  }

  /** Run a git command; rejects with GitError unless it exits 0. Resolves with stdout. */
  async run(args: readonly string[], opts: GitOptions = {}): Promise<Buffer> {
    const r = await this.exec(args, opts);
    if (r.code !== 0) throw new GitError(args, r);
    return r.stdout;
  }

  /** Like run, trimmed text. */
  async text(args: readonly string[], opts: GitOptions = {}): Promise<string> {
    return (await this.run(args, opts)).toString('utf8').trim();
  }

  /**
   * Contents of several objects (`<sha>:<path>` or object ids) through one
   * `git cat-file --batch --follow-symlinks`: a symlink inside the repository
   * is followed; anything absent, not a blob, or leading outside is undefined.
   */
  async readBlobs(specs: readonly string[]): Promise<(Buffer | undefined)[]> {
    if (specs.length === 0) return [];
    const out = await this.run(['cat-file', '--batch', '--follow-symlinks'], { input: specs.map((s) => `${s}\n`).join('') });
    return parseCatFileBatch(out, specs.length);
  }
}

/** Split `git cat-file --batch` output into `count` answers (blob contents, or undefined). */
export function parseCatFileBatch(out: Buffer, count: number): (Buffer | undefined)[] {
  const answers: (Buffer | undefined)[] = [];
  let pos = 0;
  while (answers.length < count && pos < out.length) {
    const eol = out.indexOf(0x0a, pos);
    if (eol < 0) break;
    const header = out.subarray(pos, eol).toString('utf8');
    pos = eol + 1;
    const object = /^[0-9a-f]{40,64} (blob|tree|commit|tag) (\d+)$/.exec(header);
    const followed = /^(?:symlink|dangling|loop|notdir) (\d+)$/.exec(header);
    if (object) {
      const size = Number(object[2]);
      answers.push(object[1] === 'blob' ? out.subarray(pos, pos + size) : undefined);
      pos += size + 1;
    } else if (followed) {
      pos += Number(followed[1]) + 1; // `<kind> <size>\n<what>\n`: leads outside, or broken
      answers.push(undefined);
    } else {
      answers.push(undefined); // `<spec> missing` / `<spec> ambiguous`
    }
  }
  while (answers.length < count) answers.push(undefined);
  return answers;
}
