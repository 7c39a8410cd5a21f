/**
 * `runner.run_tests_as` at start-up (src/runner/testUser.ts does the work):
 * which user tests run as (the dedicated `farmhand-test` by default when the
 * daemon can switch user, docs/configuration.md), the checks that make a
 * wrong setup a StartupError, the daemon's umask as a resource of the stack,
 * the run folders a crash left shared with the test user taken back, and the
 * warning of a daemon whose tests run as its own user.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { EX_CONFIG } from '../config/load.js';
import type { FarmConfig } from '../config/schema.js';
import type { Logger } from '../core/ports.js';
import { createTestUser, killTestUserProcesses, prepareDataDir, probeTestUser, reclaimResultDir, resolveTestUser, sweepAfterRun, unsweptRunDirs, type TestUser } from '../runner/testUser.js';
import type { ResourceStack } from '../service/resources.js';
import { tokensFile } from '../storage/tokens.js';
import { projectRoot } from '../version.js';
import { StartupError } from './startup.js';

/** The user tests run as when `runner.run_tests_as` is unset and the daemon can switch user (as the installer makes it). */
export const DEFAULT_TEST_USER = 'farmhand-test';

/** Capability numbers (linux/capability.h) a daemon that is not root needs to run tests as another user. */
const NEEDED_CAPS = { CAP_KILL: 5, CAP_SETGID: 6, CAP_SETUID: 7 } as const;

const bad = (why: string) => new StartupError(`runner.run_tests_as: ${why}`, EX_CONFIG);

/**
 * Who runs the tests: `run_tests_as` false, or unset on a daemon that cannot switch user (neither root nor holding
 * CAP_SETUID, CAP_SETGID and CAP_KILL): the daemon's own user, said at start (a warning: tests can read the node's
 * credential); a user name, or unset on a daemon that can switch user (`farmhand-test`, which a root daemon creates
 * when missing): that user, set up by setUpTestUserNamed. Undefined: the daemon's own user.
 */
export async function setUpTestUser(cfg: FarmConfig, logger: Logger, stack: ResourceStack): Promise<TestUser | undefined> {
  const configured = cfg.runner.run_tests_as;
  if (configured === false) {
    warnOwnUser(cfg, logger, 'runner.run_tests_as is false');
    return undefined;
  }
  if (configured === undefined && !(await canSwitchUser())) {
    warnOwnUser(cfg, logger, 'the daemon can switch to no other user: it is not root and lacks CAP_SETUID, CAP_SETGID and CAP_KILL');
    return undefined;
  }
  if (configured !== undefined) return setUpTestUserNamed(cfg, configured, logger, stack);
  try {
    if (process.getuid?.() === 0) await createDefaultUser(DEFAULT_TEST_USER, logger);
    return await setUpTestUserNamed(cfg, DEFAULT_TEST_USER, logger, stack);
  } catch (e) {
    if (!(e instanceof StartupError)) throw e;
    const why = `${e.message} (unset, it means ${DEFAULT_TEST_USER} on a daemon that can switch user; false runs tests as the daemon's own user, which can then read the node's credential)`;
    throw new StartupError(why, e.exitCode);
  }
}

/** Root, or the three capabilities setpriv needs, as ambient ones (they reach it). */
export async function canSwitchUser(): Promise<boolean> {
  if (process.getuid?.() === 0) return true;
  return (await missingCapabilities()).length === 0;
}

/** The daemon's own user runs the tests: a warning at start, naming what a test can read. */
function warnOwnUser(cfg: FarmConfig, logger: Logger, why: string): void {
  const what = cfg.portal ? `the node's portal credential (${cfg.portal.node_credential_file}) and act as the node on the portal` : `tokens.json and the data directory (${cfg.data_dir})`;
  logger.warn(
    { ...(cfg.portal && { node_credential_file: cfg.portal.node_credential_file }), reason: why },
    `tests run as the daemon's own user (${why}), so any test can read ${what}: set runner.run_tests_as to a dedicated user, or leave it unset on a daemon that can switch user (docs/configuration.md, "Running tests as another user")`,
  );
}

/** A root daemon's default test user, made as scripts/install-appliance.sh makes it when the machine has none. */
async function createDefaultUser(name: string, logger: Logger): Promise<void> {
  if (typeof (await resolveTestUser(name)) !== 'string') return;
  const failed = await createTestUser(name);
  if (failed) throw bad(`creating the user ${name} failed (${failed}): create it (useradd --system --no-create-home --shell /usr/sbin/nologin ${name}) or name another`);
  logger.warn({ user: name }, `created the system user ${name} to run tests as (runner.run_tests_as unset, docs/configuration.md)`);
}

/**
 * `runner.run_tests_as`: the user exists and is not the daemon's; a daemon
 * that is not root holds the capabilities setpriv needs (ambient, so they
 * reach it) and is in the user's group; the daemon's umask becomes 027 (put
 * back when the stack closes); the data directory is laid out for the test
 * user; processes a crash left of that user are killed; and, as that user,
 * the portal credential, tokens.json and state.json are unreadable and the
 * farmhand package importable. Anything else is a StartupError (EX_CONFIG).
 */
async function setUpTestUserNamed(cfg: FarmConfig, name: string, logger: Logger, stack: ResourceStack): Promise<TestUser> {
  const user = await resolveTestUser(name);
  if (typeof user === 'string') throw bad(user);
  if (process.getuid?.() !== 0) await checkCapabilities(name, user);
  // The daemon's umask, put back when it stops (tests start several daemons in one process).
  await stack.open('umask 027', () => {
    const old = process.umask(0o027);
    return { value: old, close: () => process.umask(old) };
  });
  const open = await prepareDataDir(cfg.data_dir, user);
  if (open.length) logger.warn({ files: open }, `files in the data directory that ${name} may read and the daemon may not change (not its own): give them to the daemon's user or remove them`);
  await killTestUserProcesses(user, cfg.runner.python).catch((e: unknown) => {
    throw bad(`cannot run ${cfg.runner.python} as ${name} through setpriv: ${(e as Error).message}`);
  });
  await probeSecrets(cfg, user);
  logger.info({ user: name, uid: user.uid, gid: user.gid }, 'tests run as another user');
  return user;
}

async function missingCapabilities(): Promise<string[]> {
  const status = await readFile('/proc/self/status', 'utf8').catch(() => '');
  const ambient = BigInt(`0x${/^CapAmb:\s*([0-9a-f]+)/m.exec(status)?.[1] ?? '0'}`);
  return Object.entries(NEEDED_CAPS)
    .filter(([, bit]) => (ambient & (1n << BigInt(bit))) === 0n)
    .map(([n]) => n);
}

async function checkCapabilities(name: string, user: TestUser): Promise<void> {
  const missing = await missingCapabilities();
  if (missing.length) throw bad(`the daemon is not root and lacks ${missing.join(', ')} as ambient capabilities (systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID CAP_KILL)`);
  if (!process.getgroups?.().includes(user.gid)) throw bad(`the daemon's user must be in ${name}'s group (gid ${user.gid}) to share the run folders with it (systemd: SupplementaryGroups=${name})`);
}

/** As the test user: the node's secrets unreadable, farmhand's Python package importable. */
async function probeSecrets(cfg: FarmConfig, user: TestUser): Promise<void> {
  const name = user.name;
  const secrets = [...(cfg.portal ? [cfg.portal.node_credential_file] : []), ...(cfg.oidc?.client_secret_file ? [cfg.oidc.client_secret_file] : []), tokensFile(cfg.data_dir), path.join(cfg.data_dir, 'state.json')];
  const probe = await probeTestUser(user, cfg.runner.python, path.join(projectRoot, 'python'), secrets);
  if (probe.pythonError) throw bad(`${name} cannot run ${cfg.runner.python} with farmhand's Python package (${path.join(projectRoot, 'python')}): ${probe.pythonError}`);
  if (probe.readable.length) throw bad(`${name} can read ${probe.readable.join(', ')}: make it readable by the daemon's user only (e.g. chmod 0600, or 0640 with a group ${name} is not in)`);
}

/** Run folders a crash left shared with the test user: swept and taken back, as the runner does after a run. */
export async function reclaimInterruptedRuns(resultsDir: string, user: TestUser, python: string, logger: Logger): Promise<void> {
  const dirs = await unsweptRunDirs(resultsDir, user.gid);
  if (dirs.length === 0) return;
  try {
    const r = await sweepAfterRun(user, python, dirs);
    for (const d of dirs) await reclaimResultDir(d);
    logger.warn({ folders: dirs.length, errors: r.errors }, `took back ${dirs.length} run folder(s) a crash left shared with ${user.name}`);
  } catch (err) {
    logger.error({ err, folders: dirs }, `could not take back the run folders a crash left shared with ${user.name}`);
  }
}
