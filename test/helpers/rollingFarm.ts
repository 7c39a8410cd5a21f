/**
 * Parts for the replicas' faults and figures (issue 19, item 5; test/farm/replicas-rolling.test.ts and
 * bench/replicas-failover-bench.ts): HAProxy spreading nodes and clients over N replicas, a replica's config file,
 * a CI-like v2 client that counts what it sees (503s with Retry-After, other errors, connections reset), and the
 * sha256 of a folder's files. Replica processes themselves come from `replicaFarm.ts`.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { startHaproxy, writePortalConfig, type Haproxy } from './replicaFarm.js';

/** HAProxy in front of the replicas (replicaFarm.ts's, with this file's checks). */
export type Front = Haproxy;

/**
 * HAProxy in front of the replicas, `balance roundrobin` (nodes and clients spread over every replica, so most
 * requests are proxied between replicas), checking /readyz every second: as documented, `on-marked-down
 * shutdown-sessions`, down after 5 failed checks 1 s apart (at least 4 s), longer than a stopping replica's drain
 * (3 s), as the documented `inter 2s fall 3` is; `option http-server-close` (no kept-alive connection to a replica);
 * `retry-on conn-failure empty-response` (a request a replica reset unanswered sent again: replicas-haproxy-retry),
 * made safe for a v2 `run_tests` by the `Idempotency-Key` HAProxy gives one that has none (RUN_TESTS_KEY).
 * Every request is logged (`log()`), with its retries, unless `requestLog` is false.
 */
export const startFront = (work: string, servers: Record<string, number>, o: { /** Default true; a soak leaves it off (the log is kept in memory). */ requestLog?: boolean } = {}): Promise<Front> =>
  startHaproxy(work, servers, {
    balance: 'roundrobin',
    defaultServer: 'inter 1s fall 5 rise 1 on-marked-down shutdown-sessions',
    // A new connection to a replica per request (docs/farm.md, HAProxy with replicas): a kept-alive one that the
    // replica closes (its drain, its keep-alive timeout) as HAProxy sends a request on it makes HAProxy close the
    // client's connection unanswered ("other side closed" at the client, on a run_tests too).
    // A request whose replica closed the connection having answered nothing (a stopping replica's listener closed
    // on connections the kernel had queued: reset, the request unread) is sent again, to another replica on the
    // last retry (`retries 2`, `option redispatch`: replicaFarm.ts), instead of a 502 or, on a kept-alive client
    // connection, the client's connection closed unanswered.
    backend: ['option http-server-close', 'retry-on conn-failure empty-response'],
    frontend: RUN_TESTS_KEY,
    requestLog: o.requestLog ?? true,
  });

/**
 * docs/farm.md ("HAProxy in front of the portal", with replicas): a v2 `run_tests` without an `Idempotency-Key` is
 * given one, HAProxy's unique id of the request, so that the same request sent again by `retry-on empty-response`
 * (a replica that read it and then closed the connection unanswered: it may have started the job) is answered with
 * the job it started (docs/api-notes.md, "Idempotency-Key") instead of a 409 and a job its client never hears of.
 */
export const RUN_TESTS_KEY = [
  'unique-id-format %{+X}o%ci:%cp_%fi:%fp_%Ts_%rt:%pid',
  'http-request set-header Idempotency-Key %[unique-id] if METH_POST { path /api/v2/run_tests } !{ req.hdr(idempotency-key) -m found }',
];

/** Write a replica's portal config ("many"); returns its path. */
export const replicaConfig = (
  work: string,
  o: { name: string; port: number; database: string; leaseSecs: number; /** More keys of `replicas` (e.g. hold_secs). */ replicas?: Record<string, unknown>; extra?: Record<string, unknown> },
): Promise<string> =>
  writePortalConfig(work, o.name, o.port, o.database, {
    replicas: { mode: 'many', replica_id: o.name, advertise_url: `http://127.0.0.1:${o.port}`, secret_file: path.join(work, 'replica.secret'), lease_secs: o.leaseSecs, ...o.replicas },
    ...o.extra,
  });

/** What a client saw, over all its requests. */
export interface Tally {
  requests: number;
  /** 503 answers with a Retry-After (retried after it, as the spec lets a client). */
  unavailable: number;
  /** Which requests were answered 503 (method, path without the query, the error code). */
  unavailableWhat: string[];
  /** Any other failure: 5xx, 503 without Retry-After, an unexpected status. */
  errors: string[];
  /** Requests whose connection broke after it was made (fetch failed): retried for GET, counted here. */
  resets: string[];
}

export const newTally = (): Tally => ({ requests: 0, unavailable: 0, unavailableWhat: [], errors: [], resets: [] });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A CI-like v2 client (as scripts/farmhand-v2-client.py): run_tests, await_completion until 200, the Job, the
 * job's results. A 503 with Retry-After is waited out and retried (counted); a GET whose connection broke is
 * retried (counted as a reset); everything else that is not the expected status is an error.
 */
export class CountingClient {
  constructor(
    readonly base: string,
    readonly token: string,
    readonly tally: Tally = newTally(),
  ) {}

  async call(method: string, p: string, body?: unknown, ok: number[] = [200]): Promise<{ status: number; json: any }> {
    for (;;) {
      this.tally.requests++;
      let status: number;
      let text: string;
      let retryAfter: string | null;
      try {
        const res = await fetch(`${this.base}${p}`, {
          method,
          headers: { Authorization: `token ${this.token}`, ...(body !== undefined && { 'Content-Type': 'application/json' }) },
          ...(body !== undefined && { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(180_000),
        });
        status = res.status;
        retryAfter = res.headers.get('retry-after');
        text = await res.text();
      } catch (e) {
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        this.tally.resets.push(`${method} ${p}: ${cause?.code ?? ''} ${cause?.message ?? (e as Error).message}`);
        if (method === 'GET') {
          await sleep(200);
          continue;
        }
        throw e;
      }
      if (status === 503 && retryAfter !== null && Number(retryAfter) >= 0) {
        this.tally.unavailable++;
        this.tally.unavailableWhat.push(`${method} ${p.split('?')[0]}: ${text.slice(0, 160)}`);
        await sleep(Number(retryAfter) * 1000);
        continue;
      }
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = text;
      }
      if (!ok.includes(status)) {
        this.tally.errors.push(`${method} ${p}: ${status} ${text.slice(0, 300)}`);
        throw new Error(`${method} ${p}: ${status} ${text.slice(0, 300)}`);
      }
      return { status, json };
    }
  }

  /** One job as a CI job runs it; resolves with its uid and its Job (exited). */
  async runJob(nodeId: string, testCases: string[], extra: Record<string, unknown> = {}): Promise<{ uid: string; job: any; results: any[] }> {
    const started = await this.call('POST', '/api/v2/run_tests', { node_id: nodeId, test_pack_revision: 'main', test_cases: testCases, shuffle: false, tags: {}, ...extra });
    const uid = started.json.job_uid as string;
    const job = await this.awaitJob(uid);
    const runs = ['pass', 'fail', 'error'].reduce((n, k) => n + ((job.result_counts?.[k] as number | undefined) ?? 0), 0);
    let results: any[] = [];
    for (;;) {
      results = (await this.call('GET', `/api/v2/results?filter=${encodeURIComponent(`job:${uid}`)}&sort=date:asc`)).json as any[];
      if (results.length >= runs) break;
      await sleep(500);
    }
    return { uid, job, results };
  }

  async awaitJob(uid: string): Promise<any> {
    for (;;) {
      const r = await this.call('GET', `/api/v2/jobs${uid}/await_completion`, undefined, [200, 202]);
      if (r.status === 200) break;
    }
    return (await this.call('GET', `/api/v2/jobs${uid}`)).json;
  }
}

/** A temporary file of an atomic write (src/storage/atomic.ts: `.<name>.<pid>.<8 hex>.tmp`), renamed over `<name>` when done. */
const ATOMIC_TEMP = /^\..+\.\d+\.[0-9a-f]{8}\.tmp$/;

/**
 * sha256 of every file under a folder, by relative path: the record file aside (each side writes its own), and so
 * are atomic writes' temporary files (the portal's result.json being written; the node's listing leaves them out too).
 */
export async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string, prefix: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const rel = prefix + e.name;
      if (e.isDirectory()) await walk(path.join(d, e.name), rel + '/');
      else if (rel !== 'result.json' && !ATOMIC_TEMP.test(e.name)) out[rel] = createHash('sha256').update(await readFile(path.join(d, e.name))).digest('hex');
    }
  };
  await walk(dir, '');
  return out;
}
