// Users, v2 tokens and the portal's token verifier on a real PostgreSQL cluster: tokens made,
// verified, revoked; the verifier follows revocations through NOTIFY and survives losing its
// LISTEN connection; the tables hold hashes, never a secret.
import { expect } from 'chai';
import pg from 'pg';
import { parseToken } from '../../src/core/auth.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { PgTokens, PgTokenVerifier, PgUsers } from '../../src/farm/users.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const codeOf = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code);

describe('farm users and tokens (PostgreSQL)', function () {
  this.timeout(60_000);
  let cluster: TestPostgres;
  let pool: pg.Pool;
  let users: PgUsers;
  let tokens: PgTokens;
  const verifiers: PgTokenVerifier[] = [];
  // A reload period far beyond any test: only NOTIFY (or a reconnect) can make the verifier see a change.
  const verifier = async () => {
    const v = new PgTokenVerifier(pool, { reloadSecs: 3600, retryMs: 50, maxRetryMs: 500 });
    verifiers.push(v);
    await v.start();
    return v;
  };

  before(async () => {
    cluster = await startPostgres();
    pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database });
    await migrate(pool);
    users = new PgUsers(pool);
    tokens = new PgTokens(pool);
  });
  after(async () => {
    for (const v of verifiers) await v.close();
    await pool?.end();
    await cluster?.stop();
  });

  it('adds, lists and removes users; a taken name is a conflict, a bad one invalid, an unknown one not found', async () => {
    await users.add('alice');
    await users.add('ci.bot@lab');
    expect((await users.list()).map((u) => u.username)).to.include.members(['alice', 'ci.bot@lab']);
    expect(await codeOf(users.add('alice'))).to.equal('conflict');
    expect(await codeOf(users.add('bad name'))).to.equal('invalid_request');
    await users.remove('ci.bot@lab');
    expect((await users.list()).map((u) => u.username)).not.to.include('ci.bot@lab');
    expect(await codeOf(users.remove('ci.bot@lab'))).to.equal('not_found');
  });

  it("makes tokens in the node's format that verify to their user; a token for an unknown user is not found", async () => {
    await users.add('bob');
    const { token, entry } = await tokens.createToken('bob');
    expect(token).to.match(/^fh_[0-9a-f]{8}_[A-Za-z0-9_-]{43}$/);
    expect(entry).to.include({ user: 'bob', id: parseToken(token)!.id, revoked: null, expires: null });
    const v = await verifier();
    // With the user's role (a user added without one gets run).
    expect(v.verify(token)).to.deep.equal({ user: 'bob', tokenId: entry.id, role: 'run' });
    // Right id, wrong secret; garbage; unknown id.
    expect(v.verify(token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A'))).to.equal(undefined);
    expect(v.verify('nonsense')).to.equal(undefined);
    expect(v.verify(`fh_00000000_${token.slice(12)}`)).to.equal(undefined);
    expect(await codeOf(tokens.createToken('nobody'))).to.equal('not_found');
  });

  it('roles: migration 8 makes the users of a farm from before roles admins; setRole applies to a token at once (NOTIFY)', async () => {
    // A database as an older portal left it: migrations 1-7 and a user with the old default role.
    const db = `legacy_${process.pid}`;
    await pool.query(`CREATE DATABASE ${db}`);
    const legacy = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: db });
    try {
      const { MIGRATIONS } = await import('../../src/farm/db/migrations.js');
      await migrate(legacy, MIGRATIONS.filter((m) => m.id < 8));
      await legacy.query(`INSERT INTO users (username) VALUES ('old-timer')`);
      expect((await legacy.query(`SELECT role FROM users`)).rows).to.deep.equal([{ role: 'user' }]);
      await migrate(legacy);
      expect((await legacy.query(`SELECT role FROM users`)).rows).to.deep.equal([{ role: 'admin' }]);
      const legacyUsers = new PgUsers(legacy);
      expect((await legacyUsers.add('newcomer')).role).to.equal('run');
      expect(await codeOf(legacyUsers.add('bad-role', 'root' as never))).to.equal('invalid_request');
      expect(await codeOf(legacy.query(`UPDATE users SET role = 'root' WHERE username = 'newcomer'`))).to.equal('23514');
    } finally {
      await legacy.end();
      await pool.query(`DROP DATABASE ${db}`);
    }

    await users.add('dora', 'read');
    const { token } = await tokens.createToken('dora');
    const v = await verifier();
    expect(v.verify(token)?.role).to.equal('read');
    expect(await users.setRole('dora', 'admin')).to.deep.equal({ before: 'read', after: 'admin' });
    await waitFor(() => v.verify(token)?.role === 'admin', { what: 'the verifier to reload the role after NOTIFY' });
    expect(await codeOf(users.setRole('nobody', 'run'))).to.equal('not_found');
    expect((await users.get('dora'))?.role).to.equal('admin');
  });

  it('stores only hashes: the secret appears in no table', async () => {
    await users.add('carol');
    const { token } = await tokens.createToken('carol');
    const secret = parseToken(token)!.secret;
    const { rows } = await pool.query<{ t: string }>(
      `SELECT string_agg(x::text, ' ') AS t FROM (
         SELECT row_to_json(tokens)::text AS x FROM tokens UNION ALL SELECT row_to_json(users)::text FROM users
         UNION ALL SELECT row_to_json(nodes)::text FROM nodes) all_rows`,
    );
    expect(rows[0]!.t).to.include(parseToken(token)!.id); // the dump does hold the tokens...
    expect(rows[0]!.t).not.to.include(secret); // ...but never a secret
    expect(rows[0]!.t).not.to.include(token);
  });

  it('a verifier sees a new token and a revocation through NOTIFY (no periodic reload in this test)', async () => {
    await users.add('dave');
    const v = await verifier();
    const { token, entry } = await tokens.createToken('dave');
    await waitFor(() => v.verify(token), { what: 'the new token to be accepted', timeoutMs: 30_000 });
    // Another verifier, as a second portal would have, sees the same.
    const other = await verifier();
    expect(other.verify(token)?.user).to.equal('dave');
    const revoked = await tokens.revoke(entry.id);
    expect(revoked.revoked).to.be.a('string');
    await waitFor(() => v.verify(token) === undefined && other.verify(token) === undefined, { what: 'the revocation to be seen', timeoutMs: 30_000 });
    expect((await tokens.list()).find((t) => t.id === entry.id)?.revoked).to.be.a('string');
    expect(await codeOf(tokens.revoke(entry.id))).to.equal('not_found');
    expect(await codeOf(tokens.revoke('xyz'))).to.equal('invalid_request');
  });

  it("removing a user revokes its tokens (cascade, notified); revoke takes the whole token text too", async () => {
    await users.add('erin');
    const v = await verifier();
    const a = await tokens.createToken('erin');
    const b = await tokens.createToken('erin');
    await waitFor(() => v.verify(a.token) && v.verify(b.token), { what: 'both tokens', timeoutMs: 30_000 });
    await tokens.revoke(b.token);
    await waitFor(() => !v.verify(b.token), { what: 'b revoked', timeoutMs: 30_000 });
    expect(v.verify(a.token)?.user).to.equal('erin');
    await users.remove('erin');
    await waitFor(() => !v.verify(a.token), { what: "erin's token gone with erin", timeoutMs: 30_000 });
  });

  it('the periodic reload catches a change that sent no notification', async () => {
    await users.add('heidi');
    const v = new PgTokenVerifier(pool, { reloadSecs: 0.2 });
    verifiers.push(v);
    await v.start();
    const { token, entry } = await tokens.createToken('heidi');
    await waitFor(() => v.verify(token), { what: 'the token', timeoutMs: 30_000 });
    // Revoked with the trigger off: no NOTIFY is sent, only the safety net can see it.
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('ALTER TABLE tokens DISABLE TRIGGER tokens_notify');
      await client.query('UPDATE tokens SET revoked_at = now() WHERE token_id = $1', [entry.id]);
      await client.query('ALTER TABLE tokens ENABLE TRIGGER tokens_notify');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await waitFor(() => v.verify(token) === undefined, { what: 'the periodic reload to drop the token', timeoutMs: 30_000 });
  });

  it('an expired token is refused', async () => {
    await users.add('frank');
    let now = Date.now();
    const v = new PgTokenVerifier(pool, { reloadSecs: 3600, now: () => now });
    verifiers.push(v);
    await v.start();
    const { token } = await tokens.createToken('frank', { expiresInSecs: 3600 });
    await waitFor(() => v.verify(token), { what: 'the token', timeoutMs: 30_000 });
    now += 7200 * 1000;
    expect(v.verify(token)).to.equal(undefined);
  });

  it('after its LISTEN connection is killed, the verifier reconnects and catches up on what changed meanwhile', async () => {
    await users.add('grace');
    const v = await verifier();
    const { token, entry } = await tokens.createToken('grace');
    await waitFor(() => v.verify(token), { what: 'the token', timeoutMs: 30_000 });
    const killed = await pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN farm_tokens' AND pid <> pg_backend_pid()`,
    );
    expect(killed.rowCount).to.be.greaterThan(0);
    // Revoked while (or just after) the listener is down: its notification may be lost; the reconnect's reload must catch it.
    await tokens.revoke(entry.id);
    await waitFor(() => v.verify(token) === undefined, { what: 'the revocation after the reconnect', timeoutMs: 30_000 });
    await waitFor(() => v.listening, { what: 'the LISTEN connection back', timeoutMs: 30_000 });
    // And notifications flow again on the new connection.
    const again = await tokens.createToken('grace');
    await waitFor(() => v.verify(again.token), { what: 'a token made after the reconnect', timeoutMs: 30_000 });
  });
});
