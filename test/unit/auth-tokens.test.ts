// The tokens file: TokenStore (the CLI's writer) and FileTokenVerifier (the daemon's reader).
import { expect } from 'chai';
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatToken, parseToken } from '../../src/core/auth.js';
import { FarmError } from '../../src/core/errors.js';
import { FileTokenVerifier, TokenFileError, TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { capturingLogger } from '../helpers/logger.js';


describe('tokens file', () => {
  let dir: string;
  let file: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-tokens-'));
    file = tokensFile(dir);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('token text is fh_<8 hex id>_<43 base64url>, and parses back even when the secret contains "_"', () => {
    const secret = 'a_b-'.repeat(10) + 'x_y';
    const text = formatToken('0a1b2c3d', secret);
    expect(text).to.equal(`fh_0a1b2c3d_${secret}`);
    expect(parseToken(text)).to.deep.equal({ id: '0a1b2c3d', secret });
    for (const bad of ['', 'fh_0a1b2c3d', `fh_0A1B2C3D_${secret}`, `xx_0a1b2c3d_${secret}`, `fh_0a1b2c3d_${secret}=`, `fh_0a1b2c3d_${secret.slice(1)}`]) {
      expect(parseToken(bad), bad).to.equal(undefined);
    }
  });

  it('the store never contains the secret, only its sha256, the id, the user and the creation time', async () => {
    const store = new TokenStore(file, { now: () => new Date('2026-03-04T05:06:07.000Z') });
    const { token, entry } = await store.create('alice');
    const { id, secret } = parseToken(token)!;
    const text = await readFile(file, 'utf8');
    expect(text).not.to.include(secret);
    expect(text).not.to.include(token);
    expect(entry).to.deep.equal({ id, user: 'alice', created: '2026-03-04T05:06:07.000Z', hash: createHash('sha256').update(secret).digest('hex') });
    expect(JSON.parse(text)).to.deep.equal({ version: 1, tokens: [entry] });
  });

  it('create refuses a bad user name (FarmError invalid_request) and writes nothing', async () => {
    const store = new TokenStore(file);
    for (const bad of ['', '-x', 'a b', 'a/b', 'x'.repeat(65), 'ünï']) {
      const e = await store.create(bad).catch((x: unknown) => x);
      expect(e, bad).to.be.instanceOf(FarmError).with.property('code', 'invalid_request');
    }
    expect(await store.list()).to.deep.equal([]);
    expect((await store.create('ci.bot@example-1_x')).entry.user).to.equal('ci.bot@example-1_x');
  });

  it('parallel creates do not lose a token (read-modify-write under a lock)', async () => {
    const store = new TokenStore(file);
    const made = await Promise.all(Array.from({ length: 12 }, (_, i) => store.create(`user${i}`)));
    const listed = await store.list();
    expect(listed.map((t) => t.id).sort()).to.deep.equal(made.map((m) => m.entry.id).sort());
    expect(new Set(listed.map((t) => t.id)).size).to.equal(12);
  });

  it('a missing file means no tokens, for the store and the verifier', async () => {
    expect(await new TokenStore(file).list()).to.deep.equal([]);
    const v = new FileTokenVerifier(file, capturingLogger());
    expect(v.status()).to.deep.equal({ ok: true, count: 0, roles: 0 });
    expect(v.verify(formatToken('0a1b2c3d', 'A'.repeat(43)))).to.equal(undefined);
  });

  it('the verifier accepts a created token and knows its user; a wrong secret or unknown id is refused', async () => {
    const store = new TokenStore(file);
    const { token, entry } = await store.create('alice');
    const v = new FileTokenVerifier(file, capturingLogger());
    expect(v.verify(token)).to.deep.equal({ user: 'alice', tokenId: entry.id });
    const { id, secret } = parseToken(token)!;
    const otherSecret = (secret[0] === 'A' ? 'B' : 'A') + secret.slice(1);
    expect(v.verify(formatToken(id, otherSecret))).to.equal(undefined);
    expect(v.verify(formatToken(id === 'ffffffff' ? '00000000' : 'ffffffff', secret))).to.equal(undefined);
    expect(v.verify(`token ${token}`)).to.equal(undefined);
  });

  it('"a revoked token is refused on its next request": the live verifier re-reads the changed file', async () => {
    const store = new TokenStore(file);
    const v = new FileTokenVerifier(file, capturingLogger());
    // Quick create/revoke cycles exercise the change detection, including versions
    // written within the same timestamp tick and reusing an inode number.
    for (let i = 0; i < 30; i++) {
      const { token, entry } = await store.create(`user${i % 3}`);
      expect(v.verify(token), `cycle ${i} create`).to.deep.equal({ user: `user${i % 3}`, tokenId: entry.id });
      expect(await store.revoke(entry.id)).to.deep.equal(entry);
      expect(v.verify(token), `cycle ${i} revoke`).to.equal(undefined);
    }
    expect(await store.revoke('00000000')).to.equal(undefined);
  });

  describe('change detection when the stat does not change (coarse timestamps, a reused inode)', () => {
    const frozenStat = (mtimeMs: number) => () => ({ ino: 7n, size: 100n, mtimeNs: 1n, ctimeNs: 1n, mtimeMs: BigInt(Math.round(mtimeMs)) });

    it('a version written just before it was read is re-read on every check, so a revoke is still seen', async () => {
      const store = new TokenStore(file);
      const { token, entry } = await store.create('alice');
      const v = new FileTokenVerifier(file, capturingLogger(), { stat: frozenStat(Date.now()) });
      expect(v.verify(token)).to.not.equal(undefined);
      await store.revoke(entry.id);
      expect(v.verify(token)).to.equal(undefined);
    });

    it('a version older than the racy window is trusted: only the stat is checked', async () => {
      const store = new TokenStore(file);
      const { token, entry } = await store.create('alice');
      const v = new FileTokenVerifier(file, capturingLogger(), { stat: frozenStat(Date.now() - 10_000) });
      expect(v.verify(token)).to.not.equal(undefined);
      await store.revoke(entry.id);
      // Same (frozen) stat, so the file is not read again: the cached table still has the token.
      expect(v.verify(token)).to.not.equal(undefined);
    });
  });

  it('compares in constant time, against a dummy hash when the id is unknown (same path either way)', async () => {
    const { token } = await new TokenStore(file).create('alice');
    const calls: Array<[number, number]> = [];
    const v = new FileTokenVerifier(file, capturingLogger(), {
      equal: (a, b) => {
        calls.push([a.length, b.length]);
        return timingSafeEqual(a, b);
      },
    });
    const { id, secret } = parseToken(token)!;
    expect(v.verify(token)).to.not.equal(undefined);
    expect(v.verify(formatToken(id, 'Z'.repeat(43)))).to.equal(undefined);
    expect(v.verify(formatToken(id === '12345678' ? '87654321' : '12345678', secret))).to.equal(undefined);
    // Known id with the right secret, known id with a wrong one, unknown id: one 32-byte comparison each.
    expect(calls).to.deep.equal([
      [32, 32],
      [32, 32],
      [32, 32],
    ]);
  });

  describe('a corrupt file', () => {
    it('makes the verifier refuse every token and log loudly, once per version, without throwing', async () => {
      const store = new TokenStore(file);
      const { token } = await store.create('alice');
      const cap = capturingLogger();
      const v = new FileTokenVerifier(file, cap);
      expect(v.verify(token)).to.not.equal(undefined);
      const good = await readFile(file, 'utf8');
      await writeFile(file, good.slice(0, -20)); // truncated, as by a full disk and a careless editor
      for (let i = 0; i < 5; i++) expect(v.verify(token)).to.equal(undefined);
      expect(v.status()).to.include({ ok: false });
      const errors = cap.entries.filter((l) => l.level === 'error');
      expect(errors).to.have.length(1);
      expect(String(errors[0]!.msg)).to.match(/EVERY v2 token is refused/);
      expect(cap.text()).not.to.include(parseToken(token)!.secret);
      // Fixed: accepted again, and the recovery is logged.
      await writeFile(file, good);
      expect(v.verify(token)).to.not.equal(undefined);
      expect(cap.entries.filter((l) => l.level === 'warn')).to.have.length(1);
    });

    it('is refused when well-formed JSON has a bad entry (no secret-less guesswork)', async () => {
      const v = new FileTokenVerifier(file, capturingLogger());
      await writeFile(file, JSON.stringify({ version: 1, tokens: [{ id: '0a1b2c3d', user: 'alice', created: 'yesterday', hash: 'x' }] }));
      expect(v.status()).to.include({ ok: false });
      expect(v.status().problem).to.match(/created|hash/);
    });

    it('an unreadable file is refused too, not read as empty', async () => {
      const { token } = await new TokenStore(file).create('alice');
      const v = new FileTokenVerifier(file, capturingLogger());
      expect(v.verify(token)).to.not.equal(undefined);
      // A directory in its place: unreadable even for root (a mode-000 file is not).
      await rm(file);
      await mkdir(file);
      expect(v.verify(token)).to.equal(undefined);
      expect(v.status().problem).to.match(/EISDIR/);
    });

    it('is never overwritten by the store: create and revoke fail with TokenFileError and leave it as it was', async () => {
      writeFileSync(file, '{"version": 1, "tokens": [');
      const store = new TokenStore(file);
      for (const op of [() => store.create('bob'), () => store.revoke('0a1b2c3d'), () => store.list()]) {
        const e = await op().catch((x: unknown) => x);
        expect(e).to.be.instanceOf(TokenFileError);
        expect((e as Error).message).to.include('not valid JSON');
      }
      expect(readFileSync(file, 'utf8')).to.equal('{"version": 1, "tokens": [');
    });
  });
});
