// `farmhand token create|list|revoke`: in-process through tokenCommand, and as real child
// processes while a daemon-side verifier in this process watches the same data directory.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../src/cli/program.js';
import { tokenCommand } from '../../src/cli/token.js';
import { silentLogger } from '../../src/logger.js';
import { FileTokenVerifier, tokensFile } from '../../src/storage/tokens.js';
import { runCaptured, type CliEntry, type CliRun } from '../helpers/cli.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

type Run = CliRun;

/** `farmhand token ...` in this process. */
const cli = (argv: string[]): Promise<Run> => runCaptured(tokenCommand, argv);

/** Run a command line in a child process with node + tsx, as an administrator would. */
function child(args: string[]): Promise<Run> {
  return new Promise((done) => {
    execFile(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT }, (error, out, err) => {
      done({ code: error ? ((error as { code?: number }).code ?? -1) : 0, out, err });
    });
  });
}

const TOKEN_LINE = /^fh_[0-9a-f]{8}_[A-Za-z0-9_-]{43}\n$/;

describe('farmhand token (CLI)', function () {
  // The real-process tests start several `node --import tsx` children; on a loaded 2-core box each takes seconds.
  this.timeout(120_000);
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-token-cli-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('create prints the token once on stdout (its id on stderr); list shows id, user, created, never the secret', async () => {
    const data = join(dir, 'data'); // does not exist yet: create makes it
    const made = await cli(['create', '--user', 'alice', '--data-dir', data]);
    expect(made.code).to.equal(0);
    expect(made.out).to.match(TOKEN_LINE);
    const id = made.out.slice(3, 11);
    expect(made.err).to.include(id).and.include('alice').and.include('only this once');
    const listed = await cli(['list', '--data-dir', data]);
    expect(listed.code).to.equal(0);
    const lines = listed.out.trimEnd().split('\n');
    expect(lines[0]).to.match(/^ID\s+USER\s+CREATED$/);
    expect(lines.slice(1)).to.have.length(1);
    expect(lines[1]).to.match(new RegExp(`^${id}  alice  \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z$`));
    const secret = made.out.trim().slice(12);
    expect(listed.out + (await readFile(tokensFile(data), 'utf8'))).not.to.include(secret);
  });

  it('roles: create --role, user role (none removes it), user list; the first role warns whom it lowers; a bad role is a usage error', async () => {
    const data = join(dir, 'data');
    const farmhand: CliEntry = (argv, out, err) => runCli(argv, { out, err }, { serve: () => Promise.reject(new Error('not here')) });
    const run = (argv: string[]) => runCaptured(farmhand, [...argv, '--data-dir', data]);
    const plain = await cli(['create', '--user', 'jenkins', '--data-dir', data]);
    const v = new FileTokenVerifier(tokensFile(data), silentLogger);
    expect(v.verify(plain.out.trim())).to.not.have.property('role');
    const made = await cli(['create', '--user', 'alice', '--role', 'admin', '--data-dir', data]);
    expect(made.code, made.err).to.equal(0);
    expect(made.err).to.include('(role admin)').and.include('a user without a role may only read').and.include('jenkins');
    expect(v.verify(made.out.trim())?.role).to.equal('admin');
    expect(v.verify(plain.out.trim())?.role).to.equal('read');
    const set = await run(['user', 'role', 'jenkins', 'run']);
    expect(set.code, set.err).to.equal(0);
    expect(set.out).to.equal("jenkins: read -> run; this applies to the user's tokens and sessions on their next request\n");
    expect(v.verify(plain.out.trim())?.role).to.equal('run');
    const listed = await run(['user', 'list']);
    expect(listed.out).to.match(/^USER\s+ROLE\s+TOKENS\nalice\s+admin\s+1\njenkins\s+run\s+1\n$/);
    expect((await run(['user', 'role', 'jenkins', 'root'])).code).to.equal(64);
    expect((await cli(['create', '--user', 'x', '--role', 'root', '--data-dir', data])).code).to.equal(64);
    await run(['user', 'role', 'alice', 'none']);
    await run(['user', 'role', 'jenkins', 'none']);
    expect(v.verify(plain.out.trim())).to.not.have.property('role');
  });

  it('revoke removes a token (by id, or given the whole token); an unknown id exits 1 with a message', async () => {
    const a = (await cli(['create', '--user', 'alice', '--data-dir', dir])).out.trim();
    const b = (await cli(['create', '--user', 'bob', '--data-dir', dir])).out.trim();
    const r1 = await cli(['revoke', a.slice(3, 11), '--data-dir', dir]);
    expect(r1).to.include({ code: 0 });
    expect(r1.out).to.include('alice');
    const r2 = await cli(['revoke', b, '--data-dir', dir]);
    expect(r2.code).to.equal(0);
    expect((await cli(['list', '--data-dir', dir])).out.trim().split('\n')).to.have.length(1);
    const again = await cli(['revoke', a.slice(3, 11), '--data-dir', dir]);
    expect(again.code).to.equal(1);
    expect(again.err).to.match(/no token with id/);
    expect((await cli(['revoke', 'nonsense', '--data-dir', dir])).code).to.equal(1);
  });

  it('--config is loaded like serve loads it: its data_dir (relative to the file) is used, --data-dir overrides it', async () => {
    const cfg = join(dir, 'farmhand.json');
    await writeFile(cfg, JSON.stringify({ test_pack: { url: 'https://example.com/pack.git' }, data_dir: 'state' }));
    expect((await cli(['create', '--user', 'ci', '--config', cfg])).code).to.equal(0);
    expect(JSON.parse(await readFile(join(dir, 'state', 'tokens.json'), 'utf8')).tokens).to.have.length(1);
    expect((await cli(['create', '--user', 'ci', '--config', cfg, '--data-dir', join(dir, 'other')])).code).to.equal(0);
    expect(JSON.parse(await readFile(join(dir, 'other', 'tokens.json'), 'utf8')).tokens).to.have.length(1);
  });

  it('exit 78 for a bad config, 64 for bad usage', async () => {
    const cfg = join(dir, 'bad.json');
    await writeFile(cfg, JSON.stringify({ data_dir: dir })); // no test_pack
    const bad = await cli(['list', '--config', cfg]);
    expect(bad.code).to.equal(78);
    expect(bad.err).to.include('test_pack');
    expect((await cli(['list', '--config', join(dir, 'missing.json')])).code).to.equal(78);
    for (const argv of [
      [],
      ['list'], // no --config or --data-dir
      ['frobnicate', '--data-dir', dir],
      ['create', '--data-dir', dir], // no --user
      ['create', '--user', 'a b', '--data-dir', dir],
      ['revoke', '--data-dir', dir],
      ['list', 'extra', '--data-dir', dir],
      ['list', '--user', 'x', '--data-dir', dir],
      ['list', '--bogus', '--data-dir', dir],
    ]) {
      const r = await cli(argv);
      expect(r.code, argv.join(' ')).to.equal(64);
      expect(r.err, argv.join(' ')).to.match(/usage:/i);
    }
    expect((await cli(['--help'])).code).to.equal(0);
  });

  it('a corrupt tokens file: exit 1 with the problem, and it is left untouched', async () => {
    await writeFile(tokensFile(dir), '{"version": 1, "tok');
    for (const argv of [['list'], ['create', '--user', 'x'], ['revoke', '0a1b2c3d']]) {
      const r = await cli([...argv, '--data-dir', dir]);
      expect(r.code, argv[0]).to.equal(1);
      expect(r.err).to.include('not valid JSON');
    }
    expect(await readFile(tokensFile(dir), 'utf8')).to.equal('{"version": 1, "tok');
  });

  it('real processes: a token created by `farmhand token` (src/main.ts) is accepted by a running verifier, and refused once revoked', async () => {
    const verifier = new FileTokenVerifier(tokensFile(dir), silentLogger);
    const made = await child(['src/main.ts', 'token', 'create', '--user', 'jenkins', '--data-dir', dir]);
    expect(made.code, made.err).to.equal(0);
    const token = made.out.trim();
    expect(verifier.verify(token)).to.deep.equal({ user: 'jenkins', tokenId: token.slice(3, 11) });
    const listed = await child(['src/main.ts', 'token', 'list', '--data-dir', dir]);
    expect(listed.out).to.include('jenkins');
    const revoked = await child(['src/main.ts', 'token', 'revoke', token.slice(3, 11), '--data-dir', dir]);
    expect(revoked.code).to.equal(0);
    expect(verifier.verify(token)).to.equal(undefined);
    const unknown = await child(['src/main.ts', 'token', 'revoke', token.slice(3, 11), '--data-dir', dir]);
    expect(unknown.code).to.equal(1);
  });

  it('through src/main.ts: farmhand token create/list/revoke', async () => {
    await mkdir(dir, { recursive: true });
    const made = await child(['src/main.ts', 'token', 'create', '--user', 'gitlab', '--data-dir', dir]);
    expect(made.code, made.err).to.equal(0);
    expect(made.out).to.match(TOKEN_LINE);
    const id = made.out.slice(3, 11);
    expect((await child(['src/main.ts', 'token', 'list', '--data-dir', dir])).out).to.include(id);
    expect((await child(['src/main.ts', 'token', 'revoke', id, '--data-dir', dir])).code).to.equal(0);
    expect((await child(['src/main.ts', 'token', 'revoke', id, '--data-dir', dir])).code).to.equal(1);
    expect((await child(['src/main.ts', 'token', 'list'])).code).to.equal(64);
  });
});
