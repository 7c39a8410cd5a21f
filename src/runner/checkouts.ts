/**
 * Cached working trees of test-pack commits, `<dir>/<sha>`. A checkout is
 * built in a temporary folder and renamed into place, so a folder named after
 * a SHA is always complete; leftovers of a crash (`.tmp-*`, `.trash-*`) are
 * removed. Only the most recently used checkouts are kept. One operation runs
 * at a time, so a checkout is never deleted while it is being handed out.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../core/ports.js';
import type { GitRepo } from './git.js';

export interface CheckoutCacheOptions {
  repo: GitRepo;
  dir: string;
  /** How many checkouts to keep (the most recently used). */
  keep: number;
  logger?: Logger;
}

export class CheckoutCache {
  private queue: Promise<unknown> = Promise.resolve();
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(private readonly o: CheckoutCacheOptions) {}

  /** Create the folder and remove what a crash left behind. */
  async open(): Promise<void> {
    await mkdir(this.o.dir, { recursive: true });
    for (const name of await readdir(this.o.dir)) {
      if (name.startsWith('.tmp-') || name.startsWith('.trash-')) await rm(path.join(this.o.dir, name), { recursive: true, force: true });
    }
  }

  /** The checkout of a commit (already checked to be a full SHA), made if missing. */
  checkout(sha: string): Promise<string> {
    const pending = this.inFlight.get(sha);
    if (pending) return pending;
    const p = this.serial(() => this.ensure(sha)).finally(() => this.inFlight.delete(sha));
    this.inFlight.set(sha, p);
    return p;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async ensure(sha: string): Promise<string> {
    const target = path.join(this.o.dir, sha);
    const now = new Date();
    const exists = await stat(target).then((s) => s.isDirectory(), () => false);
    if (exists) await utimes(target, now, now); // mtime = last use, for the eviction order
    else await this.build(sha, target);
    await this.evict(sha).catch((e: unknown) => this.o.logger?.warn({ err: e }, 'could not remove old checkouts'));
    return target;
  }

  private async build(sha: string, target: string): Promise<void> {
    await mkdir(this.o.dir, { recursive: true });
    const tmp = path.join(this.o.dir, `.tmp-${sha}-${randomBytes(4).toString('hex')}`);
    const index = `${tmp}.index`;
    try {
      // A private index plus checkout-index gives a plain tree of files, with
      // .gitattributes filters applied as a real checkout would (unlike
      // `git archive`, which would also honour export-ignore).
      const env = { GIT_INDEX_FILE: index };
      await this.o.repo.run([`--work-tree=${tmp}`, 'read-tree', '--end-of-options', sha], { env });
      await mkdir(tmp);
      await this.o.repo.run([`--work-tree=${tmp}`, 'checkout-index', '--all', '--force'], { env });
      await rename(tmp, target);
      this.o.logger?.info({ sha, dir: target }, 'checked out test pack');
    } finally {
      await rm(tmp, { recursive: true, force: true });
      await rm(index, { force: true });
    }
  }

  /** Delete the least recently used checkouts past `keep`, except the current and requested ones (one job at a time: its checkout is the newest). */
  private async evict(current: string): Promise<void> {
    const names = (await readdir(this.o.dir)).filter((n) => !n.startsWith('.'));
    const dated = await Promise.all(
      names.map(async (name) => ({ name, mtime: await stat(path.join(this.o.dir, name)).then((s) => s.mtimeMs, () => 0) })),
    );
    dated.sort((a, b) => b.mtime - a.mtime);
    const spare = (n: string) => n === current || this.inFlight.has(n);
    let kept = 0;
    for (const { name } of dated) {
      if (spare(name) || kept < this.o.keep - 1) {
        if (!spare(name)) kept++;
        continue;
      }
      const trash = path.join(this.o.dir, `.trash-${name}-${randomBytes(4).toString('hex')}`);
      await rename(path.join(this.o.dir, name), trash);
      await rm(trash, { recursive: true, force: true });
      this.o.logger?.debug({ sha: name }, 'removed old checkout');
    }
  }
}
