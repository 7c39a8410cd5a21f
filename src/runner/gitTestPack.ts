/**
 * The test pack as a git repository: a bare mirror of the configured
 * repository (every ref, `refs/snapshots/*` included) under the data
 * directory, read with git plumbing, plus cached checkouts for test runs.
 * Revisions from clients are validated before git sees them and are always
 * passed after `--end-of-options`, so they cannot act as options.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { notFound } from '../core/errors.js';
import type { IniConfig, Logger, Revision, TestPack } from '../core/ports.js';
import { CheckoutCache } from './checkouts.js';
import { isTestFile, testCaseNamesOf } from './discovery.js';
import { execCommand } from './exec.js';
import { GitRepo, gitEnv, gitReason } from './git.js';
import { parseIniConfig } from './iniConfig.js';
import { checkRepoPath, checkRevision, checkSha } from './revision.js';

export interface GitTestPackOptions {
  /** Path or URL of the test-pack repository (from the daemon's config, trusted). */
  url: string;
  /** The bare mirror, `<data_dir>/test-pack.git`. */
  dir: string;
  /** Cached checkouts, `<data_dir>/checkouts`. */
  worktreesDir: string;
  logger?: Logger;
  /** How many checkouts to keep; default 10. */
  keepCheckouts?: number;
  /** Bound on one `git fetch`; default 300 s. */
  fetchTimeoutSecs?: number;
  /** The git program; default `git` from PATH. */
  git?: string;
  /** While the origin cannot be fetched, retry after this long, doubling up to 5 min; default 5 s. */
  retryAfterMs?: number;
  /**
   * A revision that names a moving ref (branch, tag, HEAD, refs/...) is
   * fetched first when the last fetch is older than this, so a branch pushed
   * a moment ago runs its new commit; default 10 s. A SHA is never refetched
   * when it is already mirrored.
   */
  refreshAfterSecs?: number;
  /**
   * The mirror is fetched in the background this often (besides `fetch()`
   * when told, e.g. by the push hook), so pages and presses read refs and
   * files already in memory; default 60 s; 0: no timer.
   */
  pollSecs?: number;
}

/** How a revision is resolved. */
export interface ResolveOptions {
  /**
   * Fetch first when the mirror is older than `refreshAfterSecs` (a branch
   * pushed a moment ago runs its new commit): for run_tests and the test-case
   * listings, which pay for the fetch in their own answer. Without it the
   * revision is read from the refs as last fetched (in memory), and git runs
   * only for what is not there (a SHA not seen yet, `main~2`).
   */
  fresh?: boolean;
}

/** Config files in order of preference; the first that exists wins. */
export const CONFIG_FILES = ['config/farmhand.conf', 'config/stbt.conf', '.stbt.conf'] as const;

const FETCH_REFSPEC = '+refs/*:refs/*';
const CACHE_SIZE = 64;
/** Files kept per (commit, path) by readFile (remote files, node config); texts over the cap are not kept. */
const FILE_CACHE_SIZE = 256;
const FILE_CACHE_MAX_BYTES = 256 * 1024;

/** The mirror's refs as last fetched: full ref name -> commit, and the branch HEAD names. */
interface RefSnapshot {
  refs: Map<string, string>;
  head: string | undefined;
  headBranch: string | null;
}
const MAX_RETRY_MS = 5 * 60_000;
/** How many branch names a not-found message lists. */
const BRANCHES_SHOWN = 20;

/** The configured test pack can never work (a local path that is missing or not a repository). */
export class TestPackConfigError extends Error {
  override readonly name = 'TestPackConfigError';
}

/** True for what git reads as a local path (not `scheme://...` nor scp-like `host:path`). */
export function isLocalSource(url: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && !/^[^/]*:/.test(url);
}

/**
 * Check a local test-pack path at start: it must exist and be a git
 * repository (what `git ls-remote` accepts). URLs are not checked here: a
 * server that is down now may be up later, so the daemon starts and retries.
 */
export async function checkTestPackSource(url: string, git = 'git'): Promise<void> {
  const local = url.startsWith('file://') ? decodeURI(url.slice('file://'.length)) : isLocalSource(url) ? url : undefined;
  if (local === undefined) return;
  const st = await stat(local).catch((e: NodeJS.ErrnoException) => e);
  if (st instanceof Error) {
    throw new TestPackConfigError(`test pack ${url}: ${st.code === 'ENOENT' ? 'no such file or directory' : (st.code ?? st.message)}; set test_pack.url to a git repository`);
  }
  const arg = local.startsWith('-') ? `./${local}` : local;
  const r = await execCommand(git, ['ls-remote', arg, 'HEAD'], { env: gitEnv(), timeoutMs: 60_000 });
  if (r.code !== 0) throw new TestPackConfigError(`test pack ${url} is not a usable git repository: ${gitReason(r)}`);
}

export class GitTestPack implements TestPack {
  private readonly repo: GitRepo;
  private readonly checkouts: CheckoutCache;
  private fetching: Promise<void> | undefined;
  /** The fetch queued behind `fetching` by `fetch()`. */
  private fetchingNext: Promise<void> | undefined;
  private lastFetch = 0;
  private readonly names = new Map<string, Promise<string[]>>();
  /**
   * Per commit, what cannot change (a commit's tree is immutable): its remote
   * files and its configuration. A manual key press asks for both on every
   * press (docs/portal.md, "Live view and web remote": each git command was a
   * process started per press).
   */
  private readonly remotes = new Map<string, Promise<string[]>>();
  private readonly configs = new Map<string, Promise<IniConfig>>();
  private readonly files = new Map<string, Promise<string | undefined>>();
  /** Refs as last fetched, read after each fetch (off any request); undefined until the first read. */
  private snapshot: RefSnapshot | undefined;
  /** Full SHAs known to be commits of the mirror (a commit never leaves it but by a forced push and gc). */
  private readonly commits = new Set<string>();
  private pollTimer: NodeJS.Timeout | undefined;
  /** Why the origin cannot be fetched now; undefined while it can. */
  private unreachable: string | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = 0;
  private closed = false;

  constructor(private readonly o: GitTestPackOptions) {
    this.repo = new GitRepo(o.dir, o.git);
    this.checkouts = new CheckoutCache({ repo: this.repo, dir: o.worktreesDir, keep: Math.max(1, o.keepCheckouts ?? 10), logger: o.logger });
  }

  /**
   * Create the mirror if it is missing (or broken), point it at the configured
   * URL and fetch. A failed fetch is logged, not thrown: the daemon starts
   * without network, says "unreachable, retrying" (logs and `problem()`) and
   * fetches again in the background until it works, and when a revision is
   * not found.
   */
  async open(): Promise<void> {
    if (!(await this.isMirror())) await this.createMirror();
    const url = await this.repo.exec(['config', '--get', 'remote.origin.url']);
    if (url.stdout.toString('utf8').trim() !== this.o.url) {
      await this.repo.run(['config', 'remote.origin.url', this.o.url]);
    }
    await this.checkouts.open();
    await this.fetchShared().catch(() => undefined); // fetchShared() reports and schedules the retries
    // Offline at start: what the mirror already holds is still read from memory.
    if (!this.snapshot) await this.loadSnapshot().catch((e: unknown) => this.o.logger?.warn({ err: e }, 'could not read the test-pack refs'));
    this.startPolling();
  }

  /** A fetch every `pollSecs`, off any request; a fetch already running is shared (single flight). */
  private startPolling(): void {
    const secs = this.o.pollSecs ?? 60;
    if (secs <= 0 || this.closed) return;
    this.pollTimer = setInterval(() => {
      if (!this.closed && this.fetching === undefined) this.fetchShared().catch(() => undefined);
    }, secs * 1000);
    this.pollTimer.unref();
  }

  /** Why the test pack cannot be fetched now ("unreachable, retrying: <git's reason>"); undefined when it can. */
  problem(): string | undefined {
    return this.unreachable;
  }

  /** Stop the background retries. */
  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.pollTimer);
  }

  async resolve(revision: string, opts: ResolveOptions = {}): Promise<Revision> {
    const rev = checkRevision(revision);
    const isSha = /^[0-9a-f]{7,40}$/i.test(rev);
    if (opts.fresh && !isSha && Date.now() - this.lastFetch > (this.o.refreshAfterSecs ?? 10) * 1000) {
      // A stale mirror must not run yesterday's branch; offline, the local ref still answers.
      await this.fetchShared().catch((e: unknown) => this.o.logger?.warn({ err: e }, 'could not refresh the test pack; using the mirrored refs'));
    }
    let found = this.lookup(rev);
    if (!found) {
      found = await this.resolveInMirror(rev);
      this.commits.add(found.sha);
    }
    // A run's commit: its files are read now, off this answer (each once: they are kept per commit),
    // so the presses and the live view during its job find them in memory.
    if (opts.fresh) void this.warm(found.sha);
    return { ...found };
  }

  /**
   * A revision from memory, no git: a full SHA already seen, or a ref name as
   * git would find it (`<rev>`, `refs/<rev>`, `refs/tags/<rev>`,
   * `refs/heads/<rev>`, `refs/remotes/<rev>`, in that order).
   */
  private lookup(rev: string): Revision | undefined {
    if (/^[0-9a-f]{40}$/.test(rev)) return this.commits.has(rev) ? { sha: rev, branch: null } : undefined;
    const snap = this.snapshot;
    if (!snap) return undefined;
    if (rev === 'HEAD') return snap.head ? { sha: snap.head, branch: snap.headBranch } : undefined;
    for (const full of [rev, `refs/${rev}`, `refs/tags/${rev}`, `refs/heads/${rev}`, `refs/remotes/${rev}`]) {
      const sha = snap.refs.get(full);
      if (sha) return { sha, branch: full.startsWith('refs/heads/') ? full.slice('refs/heads/'.length) : null };
    }
    return undefined;
  }

  /** Read the refs (one `for-each-ref`, peeled), then swap them in at once. */
  private async loadSnapshot(): Promise<void> {
    const out = await this.repo.text(['for-each-ref', '--format=%(objecttype) %(objectname) %(*objecttype) %(*objectname) %(refname)']);
    const refs = new Map<string, string>();
    for (const line of out.split('\n')) {
      const m = /^(\w+) ([0-9a-f]+) (\w*) ([0-9a-f]*) (refs\/\S+)$/.exec(line);
      if (!m) continue;
      const sha = m[1] === 'commit' ? m[2] : m[3] === 'commit' ? m[4] : undefined;
      if (sha) refs.set(m[5] as string, sha);
    }
    const sym = await this.repo.exec(['symbolic-ref', '--quiet', 'HEAD']);
    const headRef = sym.code === 0 ? sym.stdout.toString('utf8').trim() : '';
    const head = headRef ? refs.get(headRef) : await this.revParse('HEAD');
    const headBranch = headRef.startsWith('refs/heads/') ? headRef.slice('refs/heads/'.length) : null;
    for (const sha of refs.values()) this.commits.add(sha);
    if (head) {
      this.commits.add(head);
      await this.warm(head);
    }
    this.snapshot = { refs, head, headBranch };
  }

  /** Read what pages and presses ask of a commit (remotes, their files, configuration) into memory. */
  private async warm(sha: string): Promise<void> {
    try {
      const names = await this.remoteControls(sha);
      await Promise.all([this.config(sha), ...names.map((n) => this.readFile(sha, `config/remote-control/${n}.lircd.conf`))]);
    } catch (e) {
      this.o.logger?.debug({ err: e, sha }, 'could not read the test pack ahead');
    }
  }

  private async resolveInMirror(rev: string): Promise<Revision> {
    let sha = await this.revParse(rev);
    if (!sha) {
      let why = '';
      await this.fetch().catch((e: unknown) => {
        why = ` (fetching from the test-pack repository failed: ${(e as Error).message})`;
      });
      sha = await this.revParse(rev);
      if (!sha) throw notFound(`revision ${JSON.stringify(rev)} not found in the test pack${why}; ${await this.describeBranches()}`);
    }
    return { sha, branch: await this.branchOf(rev) };
  }

  async testCaseNames(sha: string): Promise<string[]> {
    checkSha(sha);
    let names = this.names.get(sha);
    if (!names) {
      names = this.discover(sha);
      names.catch(() => this.names.delete(sha));
      this.names.set(sha, names);
      if (this.names.size > CACHE_SIZE) this.names.delete(this.names.keys().next().value as string);
    }
    return names;
  }

  async checkout(sha: string): Promise<string> {
    checkSha(sha);
    await this.requireCommit(sha);
    return this.checkouts.checkout(sha);
  }

  async config(sha: string): Promise<IniConfig> {
    checkSha(sha);
    return structuredClone(await cached(this.configs, sha, () => this.readConfig(sha)));
  }

  private async readConfig(sha: string): Promise<IniConfig> {
    await this.requireCommit(sha);
    const found = await this.repo.readBlobs(CONFIG_FILES.map((f) => `${sha}:${f}`));
    const at = found.findIndex((b) => b !== undefined);
    if (at < 0) return {};
    // What Python's configparser would refuse is read anyway; say so, so the typo gets fixed.
    return parseIniConfig(found[at]!.toString('utf8'), (p) =>
      this.o.logger?.warn({ file: CONFIG_FILES[at], line: p.line, sha }, `test-pack configuration ${CONFIG_FILES[at]} line ${p.line}: ${p.message}`),
    );
  }

  async remoteControls(sha: string): Promise<string[]> {
    checkSha(sha);
    return [...(await cached(this.remotes, sha, () => this.listRemotes(sha)))];
  }

  private async listRemotes(sha: string): Promise<string[]> {
    await this.requireCommit(sha);
    const suffix = '.lircd.conf';
    const out = await this.repo.run(['ls-tree', '-z', '--full-tree', '--end-of-options', sha, '--', 'config/remote-control/']);
    return parseLsTree(out)
      .filter((e) => e.type === 'blob' && e.path.endsWith(suffix))
      .map((e) => path.posix.basename(e.path).slice(0, -suffix.length))
      .filter((n) => n.length > 0)
      .sort();
  }

  async readFile(sha: string, file: string): Promise<string | undefined> {
    checkSha(sha);
    checkRepoPath(file);
    const key = `${sha}:${file}`;
    const kept = this.files.get(key);
    if (kept) return kept;
    const read = (async () => {
      await this.requireCommit(sha);
      const [blob] = await this.repo.readBlobs([key]);
      return blob?.toString('utf8');
    })();
    this.files.set(key, read);
    if (this.files.size > FILE_CACHE_SIZE) this.files.delete(this.files.keys().next().value as string);
    // Failures and big files are not kept (a commit's files never change, so what is kept stays true).
    read.then((t) => t !== undefined && t.length > FILE_CACHE_MAX_BYTES && this.files.delete(key), () => this.files.delete(key));
    return read;
  }

  /**
   * Fetch every ref from the origin, in a fetch that starts after this call:
   * what was pushed before it is in the mirror when it resolves (the push
   * hook's promise). With a fetch already running (it may have read the
   * origin's refs before the push), one more follows it, shared by every
   * caller that asked meanwhile.
   */
  fetch(): Promise<void> {
    if (!this.fetching) return this.fetchShared();
    this.fetchingNext ??= this.fetching
      .catch(() => undefined)
      .then(() => {
        this.fetchingNext = undefined;
        return this.fetchShared();
      });
    return this.fetchingNext;
  }

  /** Fetch every ref, joining a fetch already running (the timer, the retries, a stale ref's refresh). */
  private fetchShared(): Promise<void> {
    this.fetching ??= this.doFetch()
      .then(() => this.loadSnapshot())
      .then(
        () => {
          this.lastFetch = Date.now();
          this.reachable();
        },
        (e: unknown) => {
          this.failedFetch(e);
          throw e;
        },
      )
      .finally(() => (this.fetching = undefined));
    return this.fetching;
  }

  // ------------------------------------------------------------ reachability

  private reachable(): void {
    if (this.unreachable !== undefined) this.o.logger?.info({ url: this.o.url }, 'test pack reachable again');
    this.unreachable = undefined;
    this.retryMs = 0;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private failedFetch(e: unknown): void {
    const first = this.unreachable === undefined;
    this.unreachable = `test pack unreachable, retrying: ${(e as Error).message}`;
    if (first) this.o.logger?.warn({ err: e, url: this.o.url }, 'test pack unreachable, retrying');
    if (this.closed || this.retryTimer) return;
    this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs ? this.retryMs * 2 : (this.o.retryAfterMs ?? 5000));
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (!this.closed) this.fetchShared().catch(() => undefined);
    }, this.retryMs);
    this.retryTimer.unref();
  }

  // ------------------------------------------------------------ internals

  private async isMirror(): Promise<boolean> {
    const exists = await stat(this.o.dir).then(() => true, () => false);
    if (!exists) return false;
    const r = await this.repo.exec(['rev-parse', '--is-bare-repository']);
    if (r.code === 0 && r.stdout.toString().trim() === 'true') return true;
    // Ours to manage: a folder that is not a bare repository is a mirror that broke; make it again.
    this.o.logger?.warn({ dir: this.o.dir }, 'test-pack mirror is not a bare git repository; recreating it');
    await rm(this.o.dir, { recursive: true, force: true });
    return false;
  }

  /** `git init --bare` in a temporary folder, configure, rename into place: never half-made. */
  private async createMirror(): Promise<void> {
    await mkdir(path.dirname(this.o.dir), { recursive: true });
    const tmp = `${this.o.dir}.tmp-${randomBytes(4).toString('hex')}`;
    const git = new GitRepo(tmp, this.o.git);
    try {
      await git.run(['init', '--quiet', '--bare', tmp]);
      await git.run(['config', 'remote.origin.url', this.o.url]);
      await git.run(['config', 'remote.origin.fetch', FETCH_REFSPEC]);
      await rename(tmp, this.o.dir);
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    this.o.logger?.info({ dir: this.o.dir, url: this.o.url }, 'created test-pack mirror');
  }

  private async doFetch(): Promise<void> {
    const timeoutMs = (this.o.fetchTimeoutSecs ?? 300) * 1000;
    await this.repo.run(['fetch', '--quiet', '--prune', '--no-write-fetch-head', 'origin', FETCH_REFSPEC], { timeoutMs });
    await this.followOriginHead().catch((e: unknown) => this.o.logger?.warn({ err: e }, 'could not read the default branch of the test pack'));
    this.o.logger?.debug({ url: this.o.url }, 'fetched test pack');
  }

  /** Point HEAD at the origin's default branch (fetch alone does not move a mirror's HEAD). */
  private async followOriginHead(): Promise<void> {
    const out = await this.repo.text(['ls-remote', '--symref', 'origin', 'HEAD'], { timeoutMs: 60_000 });
    const m = /^ref: (refs\/heads\/\S+)\tHEAD$/m.exec(out);
    if (!m?.[1]) return;
    const current = await this.repo.exec(['symbolic-ref', '--quiet', 'HEAD']);
    if (current.stdout.toString().trim() !== m[1]) await this.repo.run(['symbolic-ref', 'HEAD', m[1]]);
  }

  private async revParse(rev: string): Promise<string | undefined> {
    const r = await this.repo.exec(['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`]);
    const sha = r.stdout.toString('utf8').trim();
    return r.code === 0 && /^[0-9a-f]{40,64}$/.test(sha) ? sha : undefined;
  }

  /** The branch a (valid, resolvable) revision names; HEAD names the default branch. */
  private async branchOf(rev: string): Promise<string | null> {
    // Git 2.39's rev-parse prints `--end-of-options` back in this mode; checkRevision already
    // guarantees that `rev` cannot be read as an option.
    const r = await this.repo.exec(['rev-parse', '--symbolic-full-name', rev]);
    const full = r.code === 0 ? r.stdout.toString('utf8').trim() : '';
    return full.startsWith('refs/heads/') ? full.slice('refs/heads/'.length) : null;
  }

  /** "its branches are: a, b" for a not-found message, so the caller sees what exists. */
  private async describeBranches(): Promise<string> {
    const r = await this.repo.exec(['for-each-ref', '--format=%(refname:strip=2)', 'refs/heads/']);
    const names = r.code === 0 ? r.stdout.toString('utf8').split('\n').filter(Boolean) : [];
    if (names.length === 0) return 'the test pack has no branches (yet)';
    const more = names.length > BRANCHES_SHOWN ? ` and ${names.length - BRANCHES_SHOWN} more` : '';
    return `its branches are: ${names.slice(0, BRANCHES_SHOWN).join(', ')}${more}`;
  }

  /**
   * not_found unless the commit is in the mirror (callers pass resolved SHAs). One known already is not asked of git
   * again: a job's checkout comes right after its revision was resolved, and a `git` started there held up the node's
   * event loop (the spawn) on every job's start.
   */
  private async requireCommit(sha: string): Promise<void> {
    if (this.commits.has(sha)) return;
    if ((await this.revParse(sha)) !== sha) throw notFound(`commit ${sha} not found in the test pack`);
    this.commits.add(sha);
  }

  private async discover(sha: string): Promise<string[]> {
    await this.requireCommit(sha);
    const out = await this.repo.run(['ls-tree', '-r', '-z', '--full-tree', '--end-of-options', sha, '--', 'tests/']);
    const files = parseLsTree(out).filter((e) => e.type === 'blob' && e.mode !== '120000' && isTestFile(e.path));
    const blobs = await this.repo.readBlobs(files.map((f) => f.oid));
    return testCaseNamesOf(files.map((f, i) => ({ path: f.path, source: blobs[i]?.toString('utf8') ?? '' })));
  }
}

/** `key`'s value from `cache`, made by `make` on a miss; failures are not kept; at most CACHE_SIZE entries. */
function cached<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let p = cache.get(key);
  if (!p) {
    p = make();
    p.catch(() => cache.delete(key));
    cache.set(key, p);
    if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  }
  return p;
}

interface TreeEntry {
  mode: string;
  type: string;
  oid: string;
  path: string;
}

/** Entries of `git ls-tree -z` output: `<mode> <type> <oid>\t<path>\0`. */
export function parseLsTree(out: Buffer): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const rec of out.toString('utf8').split('\0')) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\t(.*)$/s.exec(rec);
    if (m) entries.push({ mode: m[1] as string, type: m[2] as string, oid: m[3] as string, path: m[4] as string });
  }
  return entries;
}
