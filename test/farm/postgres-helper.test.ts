/** The throwaway PostgreSQL cluster of the farm's tests: socket only, unprivileged, removed after. */
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import pg from 'pg';
import { startPostgres } from '../helpers/postgres.js';

describe('throwaway PostgreSQL cluster (test/helpers/postgres.ts)', function () {
  this.timeout(60_000);

  it('listens on a Unix socket only, runs unprivileged, and leaves nothing behind', async () => {
    const cluster = await startPostgres();
    const client = new pg.Client({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database });
    try {
      await client.connect();
      const { rows: [row] } = await client.query<{ listen: string; superuser: string; encoding: string }>(
        "SELECT current_setting('listen_addresses') AS listen, current_setting('server_encoding') AS encoding, current_user AS superuser");
      expect(row!.listen).to.equal('');
      expect(row!.encoding).to.equal('UTF8');
      expect(row!.superuser).to.not.equal('root');
      expect(existsSync(`${cluster.host}/.s.PGSQL.${cluster.port}`)).to.equal(true);
    } finally {
      await client.end();
      await cluster.stop();
    }
    expect(existsSync(cluster.host)).to.equal(false);
  });
});
