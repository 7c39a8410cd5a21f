/**
 * A seeded generator of hostile HTTP requests for every route of the daemon
 * (v1, v2, results, the triage page, the webhook), every method, content
 * encodings, odd headers (huge, duplicated, bad Range, Authorization, Accept),
 * odd paths and query strings; and a raw client that sends them byte for byte.
 * Used by test/integration/fuzz-bad-input.test.ts (a few thousand requests)
 * and bench/soak/fuzz.ts (many more, with event-loop stall figures).
 */
import http from 'node:http';
import zlib from 'node:zlib';

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
}

export interface FuzzAnswer {
  /** -1: the connection was closed without an answer. */
  status: number;
  type: string;
  body: Buffer;
}

/** What the generator fills ids with: a real job, result and node, and a valid v2 token. */
export interface FuzzTargets {
  node: string;
  jobUid: string;
  resultId: string;
  token: string;
}

/** Every route (from src/http/v1/routes.ts, v2/routes.ts, v2/nodeRoutes.ts, resultRoutes.ts, webRoutes.ts, webhooks.ts, opsRoutes.ts). */
export function routes(t: FuzzTargets): string[] {
  const result = (p: string) => [`${p}${t.resultId}`, `${p}${t.resultId}/farmhand.log`, `${p}${t.resultId}/stbt.log`, `${p}${t.resultId}/screenshot.png`, `${p}${t.resultId}/artifacts`, `${p}${t.resultId}/artifacts/note.txt`];
  return [
    '/api/v1/device/screenshot.png', '/api/v1/device/thumbnail.jpg', '/api/v1/test_pack/main/test_case_names',
    '/api/v1/run_tests', `/api/v1/jobs${t.jobUid}`, `/api/v1/jobs${t.jobUid}/stop`, `/api/v1/jobs${t.jobUid}/results`, '/api/v1/results',
    ...result('/api/v1/result'),
    '/api/v2/nodes', `/api/v2/nodes/${t.node}`, '/api/v2/reservations', '/api/v2/reservations/1/extend', '/api/v2/reservations/1',
    '/api/v2/reservations/1/interrupt', `/api/v2/nodes/${t.node}/screenshot.png`, `/api/v2/nodes/${t.node}/thumbnail.jpg`,
    `/api/v2/nodes/${t.node}/press`, '/api/v2/test_pack/main/test_case_names', '/api/v2/run_tests', `/api/v2/jobs${t.jobUid}`,
    `/api/v2/nodes/${t.node}/job`, `/api/v2/jobs${t.jobUid}/await_completion`, `/api/v2/nodes/${t.node}/job/await_completion`,
    `/api/v2/jobs${t.jobUid}/stop`, `/api/v2/nodes/${t.node}/job/stop`, '/api/v2/results', '/api/v2/results.csv', '/api/v2/results.xml',
    '/api/v2/user', ...result('/api/v2/results'), `/app/results${t.resultId}`, '/github/post-receive',
    '/metrics', '/healthz', '/readyz',
  ];
}

export const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'CONNECT_', 'get'];

/** A small deterministic PRNG (mulberry32), so a failing run can be replayed by its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export function generator(t: FuzzTargets, seed: number): () => FuzzRequest {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const chance = (p: number) => rnd() < p;
  const all = routes(t);

  const json = (o: unknown) => Buffer.from(JSON.stringify(o));
  // Valid requests name a revision that does not exist, so the fuzz starts no jobs (one chance in 50 does).
  const goodBodies = [
    json({ test_pack_revision: 'no-such-rev', test_cases: ['tests/t.py::test_pass'] }), json({ node_id: t.node, duration_secs: 60 }),
    json({ key: 'KEY_OK' }), json({ key: 'KEY_NOPE' }), json({ node_ids: [t.node] }), json({ duration_secs: 30 }), json({ message: 'hello' }), Buffer.alloc(0),
  ];
  const badBodies = [
    '', 'null', '1', '"s"', '[]', '{}', '{', 'not json', '['.repeat(3000) + ']'.repeat(3000), '{"test_cases": 5}', '{"test_pack_revision": {"x": 1}}',
    '{"__proto__": {"polluted": true}}', '{"tags": []}', '{"node_ids": [1]}', '{"duration_secs": -1}', '{"duration_secs": 1e308}', '{"key": 7}',
    '{"test_pack_revision": "--upload-pack=sh", "test_cases": ["x"]}', '{"category": "' + 'c'.repeat(5000) + '"}',
  ].map((s) => Buffer.from(s));
  badBodies.push(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), Buffer.from([0xc3, 0x28, 0xa0, 0xa1]));
  const bomb = zlib.gzipSync(Buffer.alloc(3 * 1024 * 1024, 0x20));
  const encodings = ['gzip', 'deflate', 'br', 'x-gzip', 'identity', 'GZIP', 'compress', 'zstd', 'gzip, br', 'gzip;q=0', '', ' ', '\t', 'br'.repeat(500)];
  const encode = (enc: string, b: Buffer): Buffer => {
    const e = enc.trim().toLowerCase();
    if (e === 'gzip' || e === 'x-gzip') return zlib.gzipSync(b);
    if (e === 'deflate') return zlib.deflateSync(b);
    if (e === 'br') return zlib.brotliCompressSync(b);
    return b;
  };

  const badSegs = ['..', '%2e%2e', '%00', '%ff', '%', '%zz', 'a%2Fb', '.', '~', '-1', '99999999999999999999', 'é', '%E2%80%AE', 'x'.repeat(2000), ';', '%5c', '*', '?'];
  const oddPath = (p: string): string => {
    switch (Math.floor(rnd() * 9)) {
      case 0: return p.toUpperCase();
      case 1: return p.replaceAll('/', '//');
      case 2: return `${p}/`;
      case 3: return `${p}/${pick(badSegs)}`;
      case 4: {
        const segs = p.split('/');
        segs[1 + Math.floor(rnd() * (segs.length - 1))] = pick(badSegs);
        return segs.join('/');
      }
      case 5: return p.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
      case 6: return `${p}/..%2f..%2f..%2fetc%2fpasswd`;
      case 7: return `/${pick(['', 'api', 'api/v3', 'app', 'app/results', 'github', 'favicon.ico', '%2e%2e/%2e%2e/etc/passwd'])}`;
      default: return p;
    }
  };

  const queries = [
    `filter=testcase:${'*'.repeat(12)}a`, `filter=${encodeURIComponent('*'.repeat(40) + 'a')}`, `filter=${encodeURIComponent('a '.repeat(60))}`,
    `filter=${'x'.repeat(5000)}`, 'filter=%ff%fe', `filter=${encodeURIComponent('date:>"not a date"')}`, 'filter="unterminated', 'filter=a&filter=b',
    'sort=bogus', 'sort=date:sideways', 'sort=duration:desc', 'tz=Mars/Olympus', 'tz=Europe/London', 'tz=%00', 'tz=UTC&tz=UTC', `tz=${'Z'.repeat(300)}`,
    'junit_classname=pytest', 'junit_classname=bogus', 'junit_classname=', 'include_tz=maybe', 'limit=-1', 'a[b][c]=d', '__proto__[x]=1', '&&&=&', '%', 'token=abc',
    `q=${'%41'.repeat(3000)}`,
  ];
  const ranges = ['bytes=0-0', 'bytes=5-1', 'bytes=abc', 'bytes=-0', 'bytes=0-', 'bytes=99999999999999999999-', 'bytes=' + '0-0,'.repeat(500) + '0-0', 'items=0-1', 'bytes=-', ''];
  const auths = [
    () => `token ${t.token}`, () => `Bearer ${t.token}`, () => 'token', () => 'token fh_00000000_' + 'A'.repeat(43), () => 'Basic dXNlcjpwYXNz',
    () => `token ${t.token}x`, () => 'token ' + 'a'.repeat(6000), () => ' ', () => 'token\tfh_', () => 'Digest username="x"',
  ];
  const accepts = ['*/*', 'application/json', 'text/html', 'image/png', 'nonsense', 'text/csv;q=0', ',,,;;;', 'a/'.repeat(1000)];

  return () => {
    const route = pick(all);
    const method = chance(0.5) ? (route.includes('run_tests') || route.includes('stop') || route.includes('press') || route.includes('reservations') || route.includes('post-receive') ? 'POST' : 'GET') : pick(METHODS);
    let path = chance(0.3) ? oddPath(route) : route;
    if (chance(0.3)) path += `?${pick(queries)}`;
    if (chance(0.05)) path += `&${pick(queries)}`;
    const headers: Record<string, string | string[]> = {};
    if (path.startsWith('/api/v2') || chance(0.3)) headers.Authorization = pick(auths)();
    if (chance(0.15)) headers.Authorization = [pick(auths)(), pick(auths)()];
    if (chance(0.2)) headers.Range = pick(ranges);
    if (chance(0.2)) headers.Accept = pick(accepts);
    if (chance(0.05)) headers['X-Huge'] = 'h'.repeat(Math.floor(rnd() * 20_000));
    if (chance(0.05)) headers.Host = pick(['', 'evil.example', '[::1', 'a'.repeat(300), 'x:99999']);
    if (chance(0.1)) headers['If-None-Match'] = pick(['*', '"x"', 'W/"', '']);
    if (chance(0.1)) headers['If-Modified-Since'] = pick(['yesterday', 'Thu, 01 Jan 1970 00:00:00 GMT', '']);
    if (chance(0.1)) headers['Content-Type'] = pick(['application/json', 'text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', '']);
    let body: Buffer | undefined;
    if (method !== 'GET' && method !== 'HEAD' ? chance(0.8) : chance(0.05)) {
      body = chance(0.5) ? (chance(0.04) ? json({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass'] }) : pick(goodBodies)) : pick(badBodies);
      if (chance(0.3)) {
        const enc = pick(encodings);
        headers['Content-Encoding'] = enc;
        body = chance(0.1) ? Buffer.from('corrupt data') : chance(0.03) ? bomb : encode(enc, body);
      }
    }
    return { method, path, headers, ...(body && { body }) };
  };
}

/** Send a request as given (no normalising of the path); undefined when Node refuses to send it. */
export function send(base: URL, r: FuzzRequest, agent?: http.Agent): Promise<FuzzAnswer | undefined> {
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = http.request({
        host: base.hostname, port: base.port, method: r.method, path: r.path,
        headers: { ...r.headers, ...(r.body ? { 'Content-Length': String(r.body.length) } : {}) }, agent: agent ?? false,
      });
    } catch {
      resolve(undefined);
      return;
    }
    req.setTimeout(120_000, () => req.destroy(new Error('no answer in 120 s')));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) }));
      res.on('error', () => resolve({ status: -1, type: '', body: Buffer.alloc(0) }));
    });
    // A reset, or an answer our own client cannot parse (for a request it should not have sent), counts as -1.
    req.on('error', (e: NodeJS.ErrnoException) =>
      e.code === 'ECONNREFUSED' ? reject(e) : resolve({ status: -1, type: e.code ?? e.message, body: Buffer.alloc(0) }),
    );
    req.end(r.body);
  });
}

/**
 * What is wrong with an answer: a 500 (or a 5xx other than 501 for an unknown method, 503 device
 * unavailable, 507 storage full), or an error whose body is not JSON `{error, message}` (a portal page
 * may answer an HTML error to a request that asks for HTML).
 */
export function problemOf(r: FuzzRequest, a: FuzzAnswer): string | undefined {
  const where = `${r.method} ${r.path.slice(0, 100)} ${JSON.stringify(r.headers).slice(0, 120)}${r.body ? ` body[${r.body.length}]` : ''}`;
  if (a.status === 500 || (a.status >= 500 && a.status !== 501 && a.status !== 503 && a.status !== 507)) return `${a.status} for ${where}: ${a.body.subarray(0, 100).toString()}`;
  if (a.status >= 400 && r.method.toUpperCase() !== 'HEAD') {
    // The portal answers a page to a browser that asks for one (docs/portal.md); to anyone else the JSON error.
    const accept = ([] as string[]).concat(r.headers.Accept ?? []).join(',');
    if (/\btext\/html\b/i.test(accept) && /^text\/html/.test(a.type) && !/^\/+api\//i.test(r.path)) return undefined;
    try {
      const b = JSON.parse(a.body.toString('utf8')) as { error?: unknown; message?: unknown };
      if (!/json/.test(a.type) || typeof b.error !== 'string' || typeof b.message !== 'string') throw new Error('shape');
    } catch {
      return `non-JSON ${a.status} error for ${where}: ${a.body.subarray(0, 80).toString()}`;
    }
  }
  return undefined;
}

/** Send `count` generated requests, `concurrency` at a time; counts by status and the problems found. */
export async function fuzz(
  base: URL, t: FuzzTargets, opts: { count: number; seed: number; concurrency: number; onProgress?: (sent: number) => void; onAnswer?: (r: FuzzRequest, a: FuzzAnswer) => void },
): Promise<{ sent: number; refused: number; counts: Record<number, number>; problems: string[] }> {
  const next = generator(t, opts.seed);
  const counts: Record<number, number> = {};
  const problems: string[] = [];
  let sent = 0;
  let refused = 0;
  let issued = 0;
  const worker = async () => {
    while (issued < opts.count) {
      issued++;
      const r = next();
      const a = await send(base, r);
      if (!a) {
        refused++;
        continue;
      }
      sent++;
      counts[a.status] = (counts[a.status] ?? 0) + 1;
      opts.onAnswer?.(r, a);
      const p = problemOf(r, a);
      if (p) problems.push(p);
      if (sent % 1000 === 0) opts.onProgress?.(sent);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return { sent, refused, counts, problems };
}
