// `farmhand farm node label` as a real child process (node + tsx running src/main.ts, as an administrator runs it)
// against a throwaway PostgreSQL cluster: set, replace, remove, print, the audit trail, and the mistakes it refuses.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { allNodeLabels } from '../../src/farm/queue/labels.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import type { CliRun } from '../helpers/cli.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

function farmhand(args: string[]): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.FARMHAND_DATABASE;
  return new Promise((done) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { cwd: ROOT, env }, (error, out, err) => {
      done({ code: error ? ((error as { code?: number }).code ?? -1) : 0, out, err });
    });
  });
}

describe('farmhand farm node label (CLI, child processes, PostgreSQL)', function () {
  this.timeout(180_000);
  let cluster: TestPostgres;
  let pool: pg.Pool;
  let db: string;
  const farm = (args: string[]) => farmhand(['farm', '--database', db, ...args]);

  before(async () => {
    cluster = await startPostgres();
    const admin = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database });
    await admin.query('CREATE DATABASE farm');
    await admin.end();
    db = `postgresql://${cluster.user}@/farm?host=${encodeURIComponent(cluster.host)}&port=${cluster.port}`;
    pool = new pg.Pool({ connectionString: db });
  });
  after(async () => {
    await pool?.end();
    await cluster?.stop();
  });

  it('sets, replaces and removes labels, prints them, and records each change in the audit trail', async () => {
    expect((await farm(['node', 'add', 'stb-1'])).code).to.equal(0);
    const set = await farm(['node', 'label', 'stb-1', 'room=lab2', 'device=roku-ultra']);
    expect(set, set.err).to.include({ code: 0, out: 'stb-1: device=roku-ultra,room=lab2\n' });
    const changed = await farm(['node', 'label', 'stb-1', 'room=lab3', '--remove', 'device']);
    expect(changed, changed.err).to.include({ code: 0, out: 'stb-1: room=lab3\n' });
    expect((await allNodeLabels(pool)).get('stb-1')).to.deep.equal({ room: 'lab3' });
    expect(await farm(['node', 'label', 'stb-1'])).to.include({ code: 0, out: 'room=lab3\n' });
    const { rows } = await pool.query<{ action: string; node_id: string; who: string; detail: { before: unknown; after: unknown } }>(
      `SELECT action, node_id, who, detail FROM audit WHERE action = 'node.label' ORDER BY id`,
    );
    expect(rows.map((r) => [r.node_id, r.who, r.detail.before, r.detail.after])).to.deep.equal([
      ['stb-1', 'cli', {}, { device: 'roku-ultra', room: 'lab2' }],
      ['stb-1', 'cli', { device: 'roku-ultra', room: 'lab2' }, { room: 'lab3' }],
    ]);
  });

  it('refuses an unknown node (1), a malformed label or key, a key set and removed, a key given twice (64)', async () => {
    const unknown = await farm(['node', 'label', 'nope', 'device=roku']);
    expect(unknown.code).to.equal(1);
    expect(unknown.err).to.match(/no node "nope" is registered/);
    for (const args of [['Device=roku'], ['device'], ['device=a b'], ['--remove', 'Bad Key']]) {
      const r = await farm(['node', 'label', 'stb-1', ...args]);
      expect(r.code, `${args.join(' ')}: ${r.err}`).to.equal(64);
    }
    const both = await farm(['node', 'label', 'stb-1', 'room=x', '--remove', 'room']);
    expect(both.code).to.equal(1);
    expect(both.err).to.match(/both set and removed/);
    const twice = await farm(['node', 'label', 'stb-1', 'room=x', 'room=y']);
    expect(twice.code).to.equal(64);
    expect((await allNodeLabels(pool)).get('stb-1')).to.deep.equal({ room: 'lab3' });
  });
});
