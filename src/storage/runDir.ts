/**
 * A run's result folder, held while its test runs. The test runs in that
 * folder with the daemon's rights over the folder above it, so it can rename
 * the folder away and put a symlink (to anywhere) or another folder in its
 * place; every write farmhand makes there by name after the run (the
 * metadata files, the logs written back, the screenshot, the video,
 * `result.json`) would then land in the symlink's target.
 *
 * `hold` opens the folder (a descriptor follows the folder itself through
 * renames) and notes its real path before the test starts; `reclaim`, once
 * every process of the test is gone, checks the name still leads to that
 * folder and, when it does not, puts it right before anything is written:
 * whatever took a name on the way (a symlink, a file, another folder) is
 * renamed aside inside its own real parent (renaming a symlink moves the link,
 * never its target) and deleted once the folder is back (`rm` does not follow
 * links), a missing
 * folder above is made again, and the held folder is renamed back from
 * wherever the test moved it (its path read from `/proc/self/fd`); a
 * folder the test deleted is made again, empty. Nothing is ever written
 * through a name that is not checked to be a real folder first.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, rename, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

export class HeldRunDir {
  private constructor(
    /** The folder's path as farmhand names it. */
    readonly dir: string,
    /** Its real path when held (before the test started). */
    readonly realPath: string,
    /** The real path of the store's root (`dir` less `depth` components). */
    private readonly realHome: string,
    private readonly home: string,
    private readonly fh: FileHandle,
    private readonly dev: number,
    private readonly ino: number,
  ) {}

  /** Hold `dir`, which is `depth` folders below the store's root (a result folder: `<hex>/<num>/<stamp>`, 3). */
  static async hold(dir: string, depth = 3): Promise<HeldRunDir> {
    const home = path.resolve(dir, ...Array<string>(depth).fill('..'));
    const fh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      const [real, realHome] = await Promise.all([realpath(dir), realpath(home)]);
      return new HeldRunDir(dir, real, realHome, home, fh, st.dev, st.ino);
    } catch (e) {
      await fh.close();
      throw e;
    }
  }

  /** Whether `dir` leads, through real folders only, to the held folder. */
  async intact(): Promise<boolean> {
    const real = await realpath(this.dir).catch(() => undefined);
    if (real !== this.realPath) return false;
    const st = await lstat(this.realPath).catch(() => undefined);
    return !!st && st.isDirectory() && st.dev === this.dev && st.ino === this.ino;
  }

  /**
   * Call once the test's processes are gone. Undefined when the folder is as it
   * was; else what was put right, for the run's log. Rejects when the store's
   * root itself no longer resolves to where it was (nothing is put right then).
   * Closes the descriptor either way.
   */
  async reclaim(): Promise<string | undefined> {
    try {
      if (await this.intact()) return undefined;
      return await this.restore();
    } finally {
      await this.fh.close();
    }
  }

  private async restore(): Promise<string> {
    if ((await realpath(this.home).catch(() => undefined)) !== this.realHome) {
      throw new Error(`the results folder ${this.home} no longer resolves to ${this.realHome}; ${this.dir} cannot be put right`);
    }
    const parts = path.relative(this.realHome, this.realPath).split(path.sep);
    const found: string[] = [];
    const asides: string[] = [];
    let parent = this.realHome;
    for (const [i, name] of parts.entries()) {
      const p = path.join(parent, name);
      const last = i === parts.length - 1;
      const st = await lstat(p).catch(() => undefined);
      const mine = !!st && st.isDirectory() && (!last || (st.dev === this.dev && st.ino === this.ino));
      if (!mine) {
        if (st) {
          found.push(`${path.relative(this.realHome, p)} was ${st.isSymbolicLink() ? 'a symlink' : st.isDirectory() ? 'another folder' : 'not a folder'}`);
          const aside = path.join(parent, `.replaced-${name}-${randomBytes(4).toString('hex')}`);
          await rename(p, aside);
          asides.push(aside); // deleted once the held folder is back: it may be in there
        } else {
          found.push(`${path.relative(this.realHome, p)} was missing`);
        }
        if (last) await this.putBack(p, found);
        else await mkdir(p);
      }
      parent = p;
    }
    for (const aside of asides) await rm(aside, { recursive: true, force: true });
    return `The test replaced its result folder (${found.join('; ')}); farmhand put its own folder back before writing into it`;
  }

  /** Rename the held folder back to `p` from wherever it is now; a new empty folder when it was deleted. */
  private async putBack(p: string, found: string[]): Promise<void> {
    const now = await readlink(`/proc/self/fd/${this.fh.fd}`).catch(() => undefined);
    const st = now && !now.endsWith(' (deleted)') ? await lstat(now).catch(() => undefined) : undefined;
    if (now && st?.isDirectory() && st.dev === this.dev && st.ino === this.ino) {
      await rename(now, p);
      return;
    }
    found.push('the folder itself was deleted');
    await mkdir(p);
  }
}

/**
 * Without a held folder (a run cut short by a crash, a folder retention
 * deletes): make `rel` below the store's root `home` a chain of real folders,
 * as `HeldRunDir.reclaim` does, a folder made again empty where a symlink, a
 * file or nothing stood. Undefined when it already was; else what was put
 * right. Rejects when the root itself no longer resolves to `realHome`.
 */
export async function makeRealFolders(home: string, realHome: string, rel: string): Promise<string | undefined> {
  if ((await realpath(home).catch(() => undefined)) !== realHome) throw new Error(`the results folder ${home} no longer resolves to ${realHome}`);
  const found: string[] = [];
  const asides: string[] = [];
  let parent = realHome;
  for (const name of rel.split('/')) {
    const p = path.join(parent, name);
    const st = await lstat(p).catch(() => undefined);
    if (!st?.isDirectory()) {
      if (st) {
        found.push(`${path.relative(realHome, p)} was ${st.isSymbolicLink() ? 'a symlink' : 'not a folder'}`);
        const aside = path.join(parent, `.replaced-${name}-${randomBytes(4).toString('hex')}`);
        await rename(p, aside);
        asides.push(aside);
      }
      await mkdir(p);
    }
    parent = p;
  }
  for (const aside of asides) await rm(aside, { recursive: true, force: true });
  return found.length ? found.join('; ') : undefined;
}

