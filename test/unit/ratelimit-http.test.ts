// Rate limiting: token buckets per client, the artifact bucket, 429 with Retry-After, and
// COMPAT.md's promise that one client's normal traffic is never limited. A fake clock throughout.
import Router from '@koa/router';
import { expect } from 'chai';
import Koa from 'koa';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { configSchema } from '../../src/config/schema.js';
import { silentLogger } from '../../src/logger.js';
import { authenticate } from '../../src/http/auth.js';
import { errorHandler } from '../../src/http/errors.js';
import { isArtifactPath, RateLimiter, rateLimit, type RateLimitSettings } from '../../src/http/rateLimit.js';
import { expectError } from '../helpers/errors.js';
import { FileTokenVerifier, TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { rateExempt } from '../../src/http/endpoints/rateExempt.js';

/** The shipped defaults, so these tests prove what a node does out of the box. */
const DEFAULTS: RateLimitSettings = configSchema.parse({ test_pack: { url: '/x' } }).rate_limit;

const RESULT = '/api/v2/results/farmhand-test/beef/1/2026-01-02_03.04.05';

describe('rate limiting', () => {
  let dir: string;
  let clock: number;
  let limiter: RateLimiter;
  /** Lets a test hold await_completion until it says the job ended. */
  let finishJob: () => void;
  let jobDone: Promise<void>;

  /** errors -> authenticate -> rateLimit -> routes shaped like the real ones. */
  function app(settings: RateLimitSettings = DEFAULTS): Koa {
    limiter = new RateLimiter(settings, { now: () => clock });
    const a = new Koa();
    a.silent = true;
    const r = new Router();
    r.post('/api/v2/run_tests', (ctx) => (ctx.body = { job_uid: '/farmhand-test/beef/1', status: 'running' }));
    r.get('/api/v2/jobs/:n/:h/:j', (ctx) => (ctx.body = { status: 'running' }));
    r.get('/api/v2/jobs/:n/:h/:j/await_completion', async (ctx) => {
      await jobDone;
      ctx.body = { status: 'exited' };
    });
    r.get('/api/v2/results', (ctx) => (ctx.body = []));
    r.get('/api/v2/results/*rest', (ctx) => (ctx.body = { path: ctx.path }));
    r.get('/api/v1/jobs/:n/:h/:j', (ctx) => (ctx.body = { status: 'running' }));
    a.use(errorHandler(silentLogger));
    a.use(authenticate(new FileTokenVerifier(tokensFile(dir), silentLogger)));
    a.use(rateLimit(limiter));
    a.use(r.routes());
    return a;
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-ratelimit-'));
    clock = 1_000_000;
    jobDone = new Promise((resolve) => (finishJob = resolve));
  });
  afterEach(async () => {
    finishJob();
    await rm(dir, { recursive: true, force: true });
  });

  const statuses = (rs: request.Response[]) => rs.map((r) => r.status);
  const count = (rs: request.Response[], status: number) => rs.filter((r) => r.status === status).length;

  it('"Requests that are sent in parallel in large numbers may be rate-limited with 429": Retry-After and a JSON body', async () => {
    const http = request(app().callback());
    const rs = await Promise.all(Array.from({ length: DEFAULTS.burst + 30 }, () => http.get('/api/v2/results')));
    expect(count(rs, 200)).to.equal(DEFAULTS.burst);
    expect(count(rs, 429)).to.equal(30);
    const limited = rs.find((r) => r.status === 429)!;
    expect(limited.type).to.equal('application/json');
    expect(limited.body.error).to.equal('rate_limited');
    expect(limited.body.message).to.be.a('string').and.match(/retry/);
    expect(limited.headers['retry-after']).to.match(/^[1-9]\d*$/);
  });

  it('Retry-After is the whole seconds until a request is allowed again, at least 1, and it is right', async () => {
    const http = request(app({ requests_per_second: 0.25, burst: 2, artifact_burst: 4 }).callback());
    expect(statuses(await Promise.all([1, 2, 3].map(() => http.get('/api/v2/results'))))).to.have.members([200, 200, 429]);
    const res = await http.get('/api/v2/results');
    expectError(res, 429, 'rate_limited');
    expect(res.headers['retry-after']).to.equal('4'); // one request per 4 s
    clock += 3999;
    await http.get('/api/v2/results').expect(429);
    clock += 1;
    await http.get('/api/v2/results').expect(200);
    await http.get('/api/v2/results').expect(429);
  });

  it('"The artifact download endpoints have a generous burst allowance": their own, bigger bucket', async () => {
    const http = request(app().callback());
    const n = DEFAULTS.burst * 3;
    expect(n).to.be.lessThan(DEFAULTS.artifact_burst);
    const files = await Promise.all(Array.from({ length: n }, (_, i) => http.get(`${RESULT}/artifacts/frame-${i}.png`)));
    expect(count(files, 200)).to.equal(n);
    // The artifact downloads did not use up the API bucket, and vice versa.
    const api = await Promise.all(Array.from({ length: DEFAULTS.burst + 1 }, () => http.get('/api/v2/results')));
    expect(count(api, 429)).to.equal(1);
    await http.get(`${RESULT}/stbt.log`).expect(200);
  });

  it('each token is its own client, apart from the bucket of its address', async () => {
    const store = new TokenStore(tokensFile(dir));
    const [a, b] = [(await store.create('alice')).token, (await store.create('bob')).token];
    const http = request(app({ requests_per_second: 1, burst: 3, artifact_burst: 3 }).callback());
    const burst = (auth?: string) =>
      Promise.all([1, 2, 3, 4].map(() => (auth ? http.get('/api/v2/results').set('Authorization', `token ${auth}`) : http.get('/api/v2/results'))));
    expect(count(await burst(a), 429)).to.equal(1);
    expect(count(await burst(b), 429)).to.equal(1);
    expect(count(await burst(), 429)).to.equal(1);
  });

  /** One CI client's whole run: run_tests, a poll every 100 ms for a minute, long polls, 50 artifacts in a row. */
  async function normalClient(http: ReturnType<typeof request>, auth: Record<string, string>, v: 'v1' | 'v2') {
    const seen: number[] = [];
    const get = async (p: string) => seen.push((await http.get(p).set(auth)).status);
    seen.push((await http.post('/api/v2/run_tests').set(auth).send({})).status);
    for (let i = 0; i < 600; i++) {
      clock += 100;
      await get(v === 'v2' ? '/api/v2/jobs/farmhand-test/beef/1' : '/api/v1/jobs/farmhand-test/beef/1');
    }
    // Two long polls held while the client keeps polling: each counts once, on arrival.
    const held = [1, 2].map(() => http.get('/api/v2/jobs/farmhand-test/beef/1/await_completion').set(auth).then((r) => r.status));
    for (let i = 0; i < 100; i++) {
      clock += 100;
      await get('/api/v2/jobs/farmhand-test/beef/1');
    }
    clock += 55_000;
    finishJob();
    seen.push(...(await Promise.all(held)));
    await get('/api/v2/results?filter=job:/farmhand-test/beef/1');
    await get(`${RESULT}`);
    await get(`${RESULT}/artifacts/`);
    for (let i = 0; i < 50; i++) await get(`${RESULT}/artifacts/file-${i}.txt`); // the clock stands still: worst case
    return seen;
  }

  it('one client\'s normal traffic is never limited (COMPAT.md: the v2 client exits on a 429), with a token', async () => {
    const { token } = await new TokenStore(tokensFile(dir)).create('ci');
    const seen = await normalClient(request(app().callback()), { Authorization: `token ${token}` }, 'v2');
    expect(seen).to.have.length(1 + 600 + 100 + 2 + 3 + 50);
    expect(seen.filter((s) => s !== 200)).to.deep.equal([]);
  });

  it('one client\'s normal traffic is never limited: a v1 client without credentials', async () => {
    const seen = await normalClient(request(app().callback()), {}, 'v1');
    expect(seen.filter((s) => s !== 200)).to.deep.equal([]);
  });

  it('exempt from the limit: exactly the table\'s `rateLimited: false` entries (long polls, probes), matched as the router does', () => {
    const exempt = rateExempt();
    const yes: Array<[string, string]> = [
      ['GET', '/api/v2/jobs/farmhand-test/beef/1/await_completion'],
      ['GET', '/API/V2/nodes/farmhand-test/job/await_completion'],
      ['HEAD', '/healthz'],
      ['GET', '/readyz'],
    ];
    const no: Array<[string, string]> = [
      ['GET', '/api/v2/jobs/farmhand-test/beef/1'],
      ['POST', '/api/v2/jobs/farmhand-test/beef/1/await_completion'],
      ['GET', '/api/v2/results'],
      ['GET', '/anything/await_completion'],
      ['POST', '/readyz'],
    ];
    expect(yes.filter(([m, p]) => !exempt(m, p))).to.deep.equal([]);
    expect(no.filter(([m, p]) => exempt(m, p))).to.deep.equal([]);
  });

  it('isArtifactPath: result artifacts, saved screenshots and logs in v1 and v2; nothing else', () => {
    for (const p of [
      `${RESULT}/artifacts`,
      `${RESULT}/artifacts/sub/dir/video.mp4`,
      `${RESULT}/screenshot.png`,
      `${RESULT}/stbt.log`,
      `${RESULT}/farmhand.log`,
      '/api/v1/result/farmhand-test/beef/1/2026-01-02_03.04.05/artifacts/stdout.log',
      '/api/v1/result/farmhand-test/beef/1/2026-01-02_03.04.05/screenshot.png',
    ]) {
      expect(isArtifactPath(p), p).to.equal(true);
    }
    for (const p of ['/api/v2/results', '/api/v2/results.csv', RESULT, '/api/v2/nodes/n/screenshot.png', '/api/v1/device/screenshot.png', '/api/v2/jobs/n/beef/1', '/x.log']) {
      expect(isArtifactPath(p), p).to.equal(false);
    }
  });
});
