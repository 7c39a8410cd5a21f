// `farmhand farm user|token|node ...` as real child processes (node + tsx running src/main.ts, as an
// administrator runs the command) against a throwaway PostgreSQL cluster; what they write is checked
// through the portal's own verifiers in this process.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PgNodeCredentials } from '../../src/farm/nodeCredentials.js';
import { PgTokenVerifier } from '../../src/farm/users.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import type { CliRun } from '../helpers/cli.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** `farmhand <args>` in a child process; FARMHAND_DATABASE only when given. */
function farmhand(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!('FARMHAND_DATABASE' in env)) delete childEnv.FARMHAND_DATABASE;
  return new Promise((done) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { cwd: ROOT, env: childEnv }, (error, out, err) => {
      done({ code: error ? ((error as { code?: number }).code ?? -1) : 0, out, err });
    });
  });
}

describe('farmhand farm (CLI, child processes, PostgreSQL)', function () {
  // Each child is a `node --import tsx` start: seconds on a loaded 2-core machine.
  this.timeout(180_000);
  let cluster: TestPostgres;
  let pool: pg.Pool;
  let db: string;
  let dir: string;
  const farm = (args: string[], env?: Record<string, string>) => farmhand(['farm', '--database', db, ...args], env);

  before(async () => {
    cluster = await startPostgres();
    pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database });
    await pool.query('CREATE DATABASE farm');
    await pool.end();
    db = `postgresql://${cluster.user}@/farm?host=${encodeURIComponent(cluster.host)}&port=${cluster.port}`;
    pool = new pg.Pool({ connectionString: db });
    dir = await mkdtemp(join(tmpdir(), 'farmhand-farm-cli-'));
  });
  after(async () => {
    await pool?.end();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('on a fresh database: applies the migrations, then users, tokens (printed once, verified by the portal), revocation', async () => {
    const added = await farm(['user', 'add', 'alice']);
    expect(added, added.err).to.include({ code: 0 });
    expect((await pool.query('SELECT id FROM farm_migrations')).rowCount).to.be.greaterThan(0);

    const made = await farm(['token', 'create', 'alice']);
    expect(made.code, made.err).to.equal(0);
    expect(made.out).to.match(/^fh_[0-9a-f]{8}_[A-Za-z0-9_-]{43}\n$/);
    const token = made.out.trim();
    const id = token.slice(3, 11);
    expect(made.err).to.include(id).and.include('alice').and.include('only this once');

    const verifier = new PgTokenVerifier(pool);
    await verifier.start();
    try {
      expect(verifier.verify(token)).to.deep.equal({ user: 'alice', tokenId: id, role: 'run' });

      const users = await farm(['user', 'list']);
      expect(users.out).to.match(/^USER\s+ROLE\s+TOKENS\s+CREATED\n/).and.match(/\nalice\s+run\s+1\s+\d{4}-/);
      const tokens = await farm(['token', 'list']);
      expect(tokens.out).to.match(/^ID\s+USER\s+CREATED\s+STATE\n/).and.include(id);
      expect(tokens.out + users.out).not.to.include(token.slice(12));

      const revoked = await farm(['token', 'revoke', id]);
      expect(revoked.code, revoked.err).to.equal(0);
      expect(revoked.out).to.include(`revoked token ${id} of user alice`);
      // The verifier's table is reloaded on the NOTIFY the revocation sent.
      const { waitFor } = await import('../helpers/wait.js');
      await waitFor(() => verifier.verify(token) === undefined, { what: 'the revocation', timeoutMs: 30_000 });
      expect((await farm(['token', 'list'])).out).to.match(new RegExp(`${id}.*revoked`));

      const again = await farm(['token', 'revoke', id]);
      expect(again.code).to.equal(1);
      expect(again.err).to.match(/no valid token with id/);
      expect((await farm(['token', 'create', 'nobody'])).code).to.equal(1);
      const removed = await farm(['user', 'remove', 'alice']);
      expect(removed.code, removed.err).to.equal(0);
      expect((await farm(['user', 'remove', 'alice'])).code).to.equal(1);
    } finally {
      await verifier.close();
    }
  });

  it('roles: user add --role, user role changes it (the list says so), an unknown role is a usage error', async () => {
    const added = await farm(['user', 'add', 'carl', '--role', 'read']);
    expect(added.code, added.err).to.equal(0);
    expect(added.out).to.include('added user carl (role read)');
    const changed = await farm(['user', 'role', 'carl', 'admin']);
    expect(changed.code, changed.err).to.equal(0);
    expect(changed.out).to.match(/^carl: read -> admin; this applies/);
    expect((await farm(['user', 'list'])).out).to.match(/\ncarl\s+admin\s+0\s+/);
    expect((await farm(['user', 'role', 'carl', 'root'])).code).to.equal(64);
    expect((await farm(['user', 'add', 'dave', '--role', 'root'])).code).to.equal(64);
    expect((await farm(['user', 'role', 'nobody', 'run'])).code).to.equal(1);
  });

  it('node add prints a credential once and where it goes; it verifies; re-key, list, remove', async () => {
    const added = await farm(['node', 'add', 'stb-1']);
    expect(added.code, added.err).to.equal(0);
    expect(added.out).to.match(/^fhn_[A-Za-z0-9_-]{43}\n$/);
    expect(added.err).to.include('portal.node_credential_file').and.include('only this once');
    const creds = new PgNodeCredentials(pool);
    expect(await creds.verify('stb-1', added.out)).to.equal(true);

    const rekeyed = await farm(['node', 'add', 'stb-1']);
    expect(rekeyed.err).to.include('re-keyed');
    expect(await creds.verify('stb-1', added.out)).to.equal(false);
    expect(await creds.verify('stb-1', rekeyed.out)).to.equal(true);

    const list = await farm(['node', 'list']);
    expect(list.out).to.match(/^NODE\s+STATE\s+LAST SEEN\s+VERSION\s+REGISTERED\n/).and.match(/\nstb-1\s+offline\s+-\s+-\s+\d{4}-/);
    expect(list.out).not.to.include(rekeyed.out.trim());

    expect((await farm(['node', 'add', 'bad/id'])).code).to.equal(1);
    const removed = await farm(['node', 'remove', 'stb-1']);
    expect(removed.code, removed.err).to.equal(0);
    expect(await creds.verify('stb-1', rekeyed.out)).to.equal(false);
    const gone = await farm(['node', 'remove', 'stb-1']);
    expect(gone.code).to.equal(1);
    expect(gone.err).to.match(/no node stb-1/);
  });

  it('the database from --config (a portal config file) or FARMHAND_DATABASE; --database wins', async () => {
    const cfg = join(dir, 'portal.json');
    await writeFile(cfg, JSON.stringify({ listen: '127.0.0.1:0', database: db, storage_dir: join(dir, 'storage') }));
    expect((await farmhand(['farm', '--config', cfg, 'user', 'add', 'from-config'])).code).to.equal(0);
    expect((await farmhand(['farm', 'user', 'add', 'from-env'], { FARMHAND_DATABASE: db })).code).to.equal(0);
    const bogusEnv = { FARMHAND_DATABASE: 'postgresql:///nowhere?host=/nonexistent' };
    const both = await farmhand(['farm', '--database', db, 'user', 'list'], bogusEnv);
    expect(both.out).to.include('from-config').and.include('from-env');
  });

  it('clear errors: no database 64, malformed 64, unreachable 69, unusable config 78, unknown command 64', async () => {
    const none = await farmhand(['farm', 'user', 'list']);
    expect(none.code).to.equal(64);
    expect(none.err).to.include('--database').and.match(/usage: farmhand farm user list/i);
    const malformed = await farmhand(['farm', '--database', 'host=/tmp dbname=farm', 'user', 'list']);
    expect(malformed.code).to.equal(64);
    expect(malformed.err).to.match(/not a PostgreSQL connection URL/);
    const unreachable = await farmhand(['farm', '--database', `postgresql://u:secretpw@/farm?host=${encodeURIComponent(join(dir, 'no-socket-here'))}`, 'user', 'list']);
    expect(unreachable.code).to.equal(69);
    expect(unreachable.err).to.match(/cannot use the database/).and.not.include('secretpw');
    const noDb = await farmhand(['farm', '--database', db.replace('/farm?', '/no_such_db?'), 'user', 'list']);
    expect(noDb.code).to.equal(69);
    expect(noDb.err).to.include('no_such_db');
    const badCfg = await farmhand(['farm', '--config', join(dir, 'missing.json'), 'user', 'list']);
    expect(badCfg.code).to.equal(78);
    expect(badCfg.err).to.include('missing.json');
    const unknown = await farmhand(['farm', '--database', db, 'user', 'frobnicate']);
    expect(unknown.code).to.equal(64);
  });
});
