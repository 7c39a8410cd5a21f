/**
 * Which errors the portal answers as 503 `database_unavailable` (src/farm/db/pool.ts): the
 * database's socket refused or gone, the server shutting down; never a missing file or a bad query.
 */
import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { isDatabaseUnavailable } from '../../src/farm/db/pool.js';

const errorOf = async (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);

describe('isDatabaseUnavailable', () => {
  it('a Unix socket that is not there (PostgreSQL stopped) is the database away; a missing file is not', async () => {
    const socket = path.join(os.tmpdir(), `no-such-pg-socket-${process.pid}`, '.s.PGSQL.5432');
    const connect = await errorOf(new Promise((resolve, reject) => net.connect(socket).on('connect', resolve).on('error', reject)));
    expect(connect).to.have.property('code', 'ENOENT');
    expect(isDatabaseUnavailable(connect)).to.equal(true);
    const file = await errorOf(readFile(path.join(os.tmpdir(), `no-such-result-file-${process.pid}`)));
    expect(file).to.have.property('code', 'ENOENT');
    expect(isDatabaseUnavailable(file)).to.equal(false);
  });

  it('SQLSTATE class 08 and a shutting-down server are away; a constraint or syntax error is not', () => {
    const pgError = (code: string): Error => Object.assign(new Error('x'), { code });
    expect(isDatabaseUnavailable(pgError('08006'))).to.equal(true);
    expect(isDatabaseUnavailable(pgError('57P01'))).to.equal(true);
    expect(isDatabaseUnavailable(pgError('23505'))).to.equal(false);
    expect(isDatabaseUnavailable(pgError('42601'))).to.equal(false);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).to.equal(true);
  });
});
