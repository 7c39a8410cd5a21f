/**
 * Running test scripts as another user (`runner.run_tests_as`, docs/configuration.md):
 * the test process is started through util-linux `setpriv` with that user's
 * uid, gid and groups, no capabilities and no_new_privs, so it can neither
 * read what only the daemon's user may (the portal credential, tokens.json,
 * the data directory) nor get the daemon's uid back.
 *
 * Files: everything a test needs is group-owned by the test user's primary
 * group (the daemon's user must be a member of it) and reachable by no one
 * else. No setgid folders (the shipped unit's RestrictSUIDSGID= forbids setting
 * the bit, and none is needed: what the test makes has its primary group, what
 * the daemon makes for it is given that group one by one):
 * - `<data_dir>`: 0711, its group left alone (systemd's StateDirectory= would
 *   otherwise chown the whole tree back at every start): anyone may pass
 *   through, no one list it; every other entry in it is closed to others at
 *   start, and the daemon's umask becomes 027 so what it writes later stays so;
 * - `<data_dir>/results` and a run's job folders: 0710, group = test group: the
 *   test may pass through to its own folder, not list them; the entries of
 *   `results` itself (index.jsonl, ...) are closed to others at start too;
 * - `<data_dir>/checkouts` and the run's checkout: group = test group, readable, not writable;
 * - a running run's result folder and its work folder (report; config.json 0640): 0770;
 * - the control socket's folder 0710 and the socket 0660, group = test group.
 * After the run every process of the test user is killed (the user must be
 * dedicated to this daemon), its files in those folders are given to the
 * group (so the daemon can read and delete them), and the result folder is
 * taken back (0750, the daemon's group): no later test can change it.
 */
import { chmod, chown, lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { execCommand } from './exec.js';

export interface TestUser {
  name: string;
  uid: number;
  gid: number;
}

/** Where setpriv is on Debian (util-linux, essential). */
export const SETPRIV = '/usr/bin/setpriv';

/** The user's uid and primary gid from the system's user database (getent: files, LDAP, ...). */
export async function resolveTestUser(name: string): Promise<TestUser | string> {
  const r = await execCommand('getent', ['passwd', name], { timeoutMs: 10_000 });
  if (r.spawnError) return `cannot look the user up (getent: ${r.spawnError.message})`;
  const fields = r.stdout.toString('utf8').trim().split(':');
  if (r.code !== 0 || fields.length < 4) return `no user ${name} on this machine (create it: useradd --system --no-create-home --shell /usr/sbin/nologin ${name})`;
  const uid = Number(fields[2]);
  const gid = Number(fields[3]);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) return `the user database gives ${name} no numeric uid/gid`;
  if (uid === 0 || gid === 0) return `${name} is root (uid or gid 0): tests must run as an unprivileged user`;
  if (uid === process.getuid?.()) return `${name} is the daemon's own user: tests must run as another user`;
  if (gid === process.getgid?.()) return `${name}'s group (gid ${gid}) is the daemon's own group: give ${name} a group of its own (useradd --system makes one)`;
  return { name, uid, gid };
}

/**
 * Make `name` a system user with a group of its own, no home and no shell, as scripts/install-appliance.sh does
 * (root only). Undefined when made (or made in between by someone else), else why not.
 */
export async function createTestUser(name: string): Promise<string | undefined> {
  const r = await execCommand('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', name], { timeoutMs: 30_000 });
  if (r.code === 0 || typeof (await resolveTestUser(name)) !== 'string') return undefined;
  return (r.spawnError?.message ?? r.stderr.trim().split('\n').pop()) || `useradd exited with status ${String(r.code)}`;
}

/**
 * The command line that runs `argv` as the test user: its uid (real, effective
 * and saved), gid and groups, no inheritable or ambient capabilities (the
 * daemon's CAP_SETUID/SETGID/KILL stay behind), no_new_privs (no setuid program
 * gives any back).
 */
export function asTestUser(user: TestUser, argv: readonly string[]): { cmd: string; args: string[] } {
  return {
    cmd: SETPRIV,
    args: [
      `--reuid=${user.uid}`,
      `--regid=${user.gid}`,
      '--init-groups',
      '--inh-caps=-all',
      '--ambient-caps=-all',
      '--no-new-privs',
      '--',
      ...argv,
    ],
  };
}

/** Set the group and mode of one folder the daemon owns (never through a symlink). */
async function share(dir: string, gid: number, mode: number): Promise<void> {
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a folder`);
  if (st.gid !== gid) await chown(dir, -1, gid);
  await chmod(dir, mode);
}

/**
 * Every entry directly in `dir`, except `keep`: nothing for others (o-rwx).
 * Returns the ones the daemon may not change (another user's, root's).
 */
async function closeToOthers(dir: string, keep: readonly string[]): Promise<string[]> {
  const refused: string[] = [];
  for (const name of await readdir(dir)) {
    if (keep.includes(name)) continue;
    const p = path.join(dir, name);
    const st = await lstat(p).catch(() => undefined);
    if (!st || st.isSymbolicLink() || (st.mode & 0o007) === 0) continue;
    try {
      await chmod(p, st.mode & 0o7770);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EPERM') throw e;
      refused.push(p);
    }
  }
  return refused;
}

/** Group `gid`, readable (not writable) by it, recursively (or `root` alone); symlinks left as they are. */
async function readableByGroup(root: string, gid: number, recursive = true): Promise<void> {
  const stack = [root];
  while (stack.length) {
    const p = stack.pop()!;
    const st = await lstat(p).catch(() => undefined);
    if (!st || st.isSymbolicLink()) continue;
    if (st.gid !== gid) await chown(p, -1, gid);
    const dir = st.isDirectory();
    const want = ((st.mode & 0o1777) | 0o040 | (dir || st.mode & 0o100 ? 0o010 : 0)) & ~0o020;
    if (want !== (st.mode & 0o7777) || st.gid !== gid) await chmod(p, want);
    if (dir && recursive) for (const n of await readdir(p)) stack.push(path.join(p, n));
  }
}

/**
 * At start: the data directory as described above. `results` and `checkouts`
 * are created here if missing. Returns the entries left open to others that
 * the daemon may not change (not its own): the caller warns.
 */
export async function prepareDataDir(dataDir: string, user: TestUser): Promise<string[]> {
  const results = path.join(dataDir, 'results');
  const checkouts = path.join(dataDir, 'checkouts');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(results, { recursive: true });
  await mkdir(checkouts, { recursive: true });
  await chmod(dataDir, 0o711);
  const refused = await closeToOthers(dataDir, ['results', 'checkouts']);
  await share(results, user.gid, 0o710);
  refused.push(...(await closeToOthers(results, [])));
  await readableByGroup(checkouts, user.gid);
  return refused;
}

/**
 * Before a run: its job folders passable, its result folder and work folder
 * writable, its checkout readable, by the test group. The checkout's files are only looked at when
 * already right (a new checkout's are given to the group once).
 */
export async function prepareRun(run: { resultDir: string; work: string; checkoutDir: string }, user: TestUser): Promise<void> {
  const job = path.dirname(run.resultDir);
  await share(path.dirname(job), user.gid, 0o710);
  await share(job, user.gid, 0o710);
  await share(run.resultDir, user.gid, 0o770);
  await share(run.work, user.gid, 0o770);
  await readableByGroup(path.dirname(run.checkoutDir), user.gid, false);
  await readableByGroup(run.checkoutDir, user.gid);
}

/** A file the daemon writes for the test (config.json): readable by the test group, not writable. */
export async function giveToTest(file: string, user: TestUser): Promise<void> {
  await chown(file, -1, user.gid);
  await chmod(file, 0o640);
}

/** After a run (and its files): the result folder is the daemon's alone again; the test group keeps no way in. */
export async function reclaimResultDir(resultDir: string): Promise<void> {
  const gid = process.getgid?.() ?? 0;
  await chown(resultDir, -1, gid);
  await chmod(resultDir, 0o750);
}

/**
 * Run as the test user: kill every process of that user (kill(-1), which the
 * kernel does in one step, so a fork loop cannot outrun it) until none is
 * left, then give each of its files under `roots` to its group with group
 * read/write (folders: group search too) and nothing for others, so the
 * daemon can read, rewrite and delete them. Symlinks are not followed.
 */
const SWEEP_PY = String.raw`
import json, os, signal, stat, sys, time
gid = int(sys.argv[1]); roots = sys.argv[2:]; me = os.getpid(); uid = os.getuid()
def others():
    n = 0
    for p in os.listdir('/proc'):
        if not p.isdigit() or int(p) == me: continue
        try:
            with open('/proc/%s/status' % p) as f: s = f.read()
        except OSError: continue
        st = uids = None
        for line in s.splitlines():
            if line.startswith('State:'): st = line.split()[1]
            if line.startswith('Uid:'): uids = line.split()[1:]
        if uids and str(uid) in uids and st not in ('Z', 'X'): n += 1
    return n
killed = 0
deadline = time.monotonic() + 10
while True:
    try:
        os.kill(-1, signal.SIGKILL); killed += 1
    except ProcessLookupError: pass
    if others() == 0: break
    if time.monotonic() > deadline:
        print(json.dumps({"error": "processes of the test user survive SIGKILL"})); sys.exit(3)
    time.sleep(0.02)
fixed = 0; errors = []
stack = list(roots)
while stack:
    p = stack.pop()
    try:
        st = os.lstat(p)
    except OSError: continue
    if stat.S_ISLNK(st.st_mode): continue
    d = stat.S_ISDIR(st.st_mode)
    if st.st_uid == uid:
        try:
            if st.st_gid != gid: os.chown(p, -1, gid, follow_symlinks=False)
            m = stat.S_IMODE(st.st_mode)
            want = ((m | 0o770) if d else (m | 0o660 | (0o010 if m & 0o100 else 0))) & ~0o6007
            if want != m or st.st_gid != gid: os.chmod(p, want); fixed += 1
        except OSError as e: errors.append("%s: %s" % (p, e.strerror))
    if d:
        try: stack.extend(os.path.join(p, n) for n in os.listdir(p))
        except OSError as e: errors.append("%s: %s" % (p, e.strerror))
print(json.dumps({"killed_rounds": killed, "fixed": fixed, "errors": errors[:20]}))
`;

export interface SweepReport {
  fixed: number;
  errors: string[];
}

/** See SWEEP_PY. Throws when it could not run or processes survived. */
export async function sweepAfterRun(user: TestUser, python: string, roots: readonly string[]): Promise<SweepReport> {
  const { cmd, args } = asTestUser(user, [python, '-I', '-c', SWEEP_PY, String(user.gid), ...roots]);
  const r = await execCommand(cmd, args, { timeoutMs: 60_000, env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' } });
  const out = r.stdout.toString('utf8').trim();
  let parsed: { fixed?: number; errors?: string[]; error?: string } | undefined;
  try {
    parsed = JSON.parse(out.split('\n').pop() ?? '') as typeof parsed;
  } catch {
    parsed = undefined;
  }
  if (r.code !== 0 || !parsed || parsed.error) {
    throw new Error(`the after-run sweep as ${user.name} failed (exit ${String(r.code)}): ${parsed?.error ?? (r.spawnError?.message ?? r.stderr.trim()).slice(0, 500)}`);
  }
  return { fixed: parsed.fixed ?? 0, errors: parsed.errors ?? [] };
}

/**
 * Run folders still shared with the test group (0770, group `gid`): a run the
 * daemon did not end itself (it crashed or was killed mid-run), whose files the
 * test may have made unreadable. Looks at every run folder once (at start).
 */
export async function unsweptRunDirs(resultsDir: string, gid: number): Promise<string[]> {
  const found: string[] = [];
  const dirs = async (p: string) => (await readdir(p, { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => path.join(p, e.name));
  for (const hex of await dirs(resultsDir)) {
    for (const job of await dirs(hex)) {
      for (const run of await dirs(job)) {
        const st = await lstat(run).catch(() => undefined);
        if (st && st.gid === gid && (st.mode & 0o070) === 0o070) found.push(run);
      }
    }
  }
  return found;
}

/** Kill every process of the test user (one a crashed daemon left behind, say). */
export async function killTestUserProcesses(user: TestUser, python: string): Promise<void> {
  await sweepAfterRun(user, python, []);
}

/**
 * Which of `files` the test user can read, and whether it can run `python`
 * with the farmhand package at `pythonPath`: checked at start, as that user.
 */
export async function probeTestUser(user: TestUser, python: string, pythonPath: string, files: readonly string[]): Promise<{ readable: string[]; pythonError?: string }> {
  const script = String.raw`
import json, sys
ok = []
for p in sys.argv[1:]:
    try:
        open(p, 'rb').close(); ok.append(p)
    except OSError: pass
import farmhand
print(json.dumps(ok))
`;
  const { cmd, args } = asTestUser(user, [python, '-c', script, ...files]);
  const r = await execCommand(cmd, args, { timeoutMs: 30_000, env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', PYTHONPATH: pythonPath, PYTHONDONTWRITEBYTECODE: '1' }, cwd: '/' });
  if (r.code !== 0) return { readable: [], pythonError: (r.spawnError?.message ?? r.stderr.trim().split('\n').slice(-3).join(' ')) || `exit status ${String(r.code)}` };
  try {
    return { readable: JSON.parse(r.stdout.toString('utf8').trim().split('\n').pop() ?? '[]') as string[] };
  } catch {
    return { readable: [], pythonError: 'the probe printed no answer' };
  }
}
