/**
 * The node's side of result uploads (docs/farm.md, "Results: uploads and the
 * farm index"): every finished run (`run.finished`) is queued, and its files
 * are delivered to the portal by one async loop, apart from the runs. The
 * record itself goes in the node's stream, with its run.finished (docs/farm.md,
 * "The node stream"): here only bytes travel. Each file of a result, one at a
 * time, in chunks (1 MiB, one reused buffer: bounded memory), resumed at the
 * offset the portal holds, checked by its sha256; then `complete` (the portal
 * serves the files from its storage from then on; 409 while the record has
 * not reached it yet, asked again after the back-off).
 *
 * The queue is a file in the data directory (`farm-uploads.json`, replaced
 * atomically at each change), with the files already delivered: a node
 * restarted, or a portal down for an hour, still delivers every result later,
 * without sending a whole file twice. A failure retries with jittered
 * exponential back-off (1 s doubling to 60 s, times 0.5..1); the failed result
 * goes to the back of the queue so one that keeps failing never holds up the
 * others. A result deleted on the node before it was delivered (retention)
 * leaves the queue with a warning.
 *
 * A run's files wait `delayMs` (3 s) after its run.finished before they
 * travel: a node of a queue's pool starts its next job in that moment, and
 * on a busy machine the upload's reads, hashes and requests (and the
 * portal's side of them) made that start later (docs/queue.md). The wait is
 * in memory only: results queued from the file at start go at once.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { FarmError } from '../core/errors.js';
import type { FarmEvent } from '../core/events.js';
import type { ResultRecord } from '../core/model.js';
import type { Logger, ResultRepository } from '../core/ports.js';
import { parseResultQuery } from '../core/query.js';
import { silentLogger } from '../logger.js';
import { writeFileAtomic } from '../storage/atomic.js';
import { openRegular } from '../storage/safeFile.js';

export const UPLOAD_QUEUE_FILE = 'farm-uploads.json';
const DEFAULT_CHUNK = 1 << 20;
const DEFAULT_DELAY_MS = 3000;
/** One request's time limit: a portal that stops answering is a failure to retry, not a hang. */
const REQUEST_TIMEOUT_MS = 60_000;

export interface QueuedResult {
  result_id: string;
  /** Relative paths of the files the portal has whole (checked). */
  done: string[];
}

export interface ResultUploaderOptions {
  nodeId: string;
  /** The portal's base URL, e.g. `https://portal.example:8443`. */
  portalUrl: string;
  /** The node's credential (`farmhand farm node add` printed it). */
  credential: string;
  results: Pick<ResultRepository, 'get' | 'artifacts' | 'openArtifact' | 'query'>;
  /** Where run.finished comes from (the node's EventHub). */
  events: { subscribe(fn: (e: FarmEvent) => void): { close(): void } };
  /** The queue file (`<data_dir>/farm-uploads.json`). */
  queueFile: string;
  logger?: Logger;
  /** How long a result queued by its run.finished waits before its files travel (default 3000; 0: at once). */
  delayMs?: number;
  chunkBytes?: number;
  retry?: { minMs: number; maxMs: number };
  /** 0..1; tests pass their own. */
  random?: () => number;
}

/** The result cannot be delivered any more (deleted on the node): it leaves the queue. */
class Undeliverable extends Error {}

/** An answer of the portal other than the one expected. */
export class PortalError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`${what}: the portal answered ${status} ${body.slice(0, 300)}`);
  }
}

export class ResultUploader {
  private queue: QueuedResult[] = [];
  /** start_time of the newest result ever queued: at start, newer results (a crash before the queue write) are queued. */
  private since: string | undefined;
  private readonly log: Logger;
  private readonly chunkBytes: number;
  private readonly retry: { minMs: number; maxMs: number };
  private readonly random: () => number;
  private readonly base: string;
  private sub: { close(): void } | undefined;
  private loops: Array<Promise<void>> = [];
  private stopping = false;
  private abort = new AbortController();
  /** The paused lanes' wake-ups. */
  private readonly wakers = new Set<() => void>();
  private writes: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<(resultId: string) => void>();
  /** When each result queued by its run.finished may travel (ms since the epoch). */
  private readonly notBefore = new Map<string, number>();
  /** Results delivered since start (record and every file). */
  delivered = 0;
  /** Failed attempts since start (each is retried). */
  failures = 0;

  constructor(private readonly o: ResultUploaderOptions) {
    this.log = (o.logger ?? silentLogger).child({ module: 'farm-uploader' });
    this.chunkBytes = o.chunkBytes ?? DEFAULT_CHUNK;
    this.retry = o.retry ?? { minMs: 1000, maxMs: 60_000 };
    this.random = o.random ?? Math.random;
    this.base = o.portalUrl.replace(/\/+$/, '');
  }

  /** Results waiting (including the one being delivered). */
  get pending(): readonly string[] {
    return this.queue.map((q) => q.result_id);
  }

  /** Load the queue, follow run.finished, start delivering. */
  async start(): Promise<void> {
    const loaded = await loadQueue(this.o.queueFile, this.log);
    this.queue = loaded.results;
    this.since = loaded.since;
    this.sub = this.o.events.subscribe((e) => {
      if (e.type !== 'run.finished') return;
      const id = (e.data as { result_id: string }).result_id;
      const delayMs = this.o.delayMs ?? DEFAULT_DELAY_MS;
      if (delayMs > 0 && !this.notBefore.has(id)) this.notBefore.set(id, Date.now() + delayMs);
      this.enqueue(id);
    });
    this.catchUp();
    if (this.queue.length > 0) this.log.info({ pending: this.queue.length }, 'results waiting to be uploaded to the portal');
    this.loops = [this.lane('files', () => true, (item) => this.deliver(item))];
  }

  /** Queue a result (once). */
  enqueue(resultId: string): void {
    if (this.stopping || this.queue.some((q) => q.result_id === resultId)) return;
    this.queue.push({ result_id: resultId, done: [] });
    const rec = this.o.results.get(resultId);
    if (rec && rec !== 'deleted' && (this.since === undefined || rec.start_time > this.since)) this.since = rec.start_time;
    this.persist();
    this.nudge();
  }

  /**
   * Results recorded after the newest one queued (the node stopped between a
   * run's record and the queue's write) are queued now. The first start with
   * a portal queues nothing from before: the farm gets results from joining on.
   */
  private catchUp(): void {
    // The newest first (the index's default order, at most its limit): only a crash's few are ever missing.
    const newest = this.o.results.query(parseResultQuery({}));
    if (this.since === undefined) {
      this.since = newest[0]?.start_time ?? new Date().toISOString();
      this.persist();
      return;
    }
    const since = this.since;
    const missed = newest.filter((r) => r.start_time > since).reverse();
    if (missed.length > 0) this.log.warn({ results: missed.length }, 'results recorded after the upload queue was last written: queued now');
    for (const r of missed) this.enqueue(r.result_id);
  }

  /** Try now instead of at the end of the back-off (the portal is back: the link reconnected). */
  nudge(): void {
    for (const wake of [...this.wakers]) wake();
  }

  /** Called with each delivered result id; returns the unsubscribe. */
  onDelivered(fn: (resultId: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Stop delivering (the queue stays on disk: the next start goes on). */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.sub?.close();
    this.abort.abort();
    this.nudge();
    await Promise.all(this.loops);
    await this.writes;
  }

  // -------------------------------------------------------------- the lanes

  /** One lane: the first queued result that `wants`, one at a time, through `work`; back-off on a failure. */
  private async lane(name: string, wants: (q: QueuedResult) => boolean, work: (item: QueuedResult) => Promise<'done' | 'next'>): Promise<void> {
    let failuresInARow = 0;
    while (!this.stopping) {
      const wanted = this.queue.filter(wants);
      if (wanted.length === 0) {
        await this.pause(undefined);
        continue;
      }
      // The first result whose delay is over; a fresh one ahead in the queue holds up none behind it.
      const readyAt = (q: QueuedResult): number => this.notBefore.get(q.result_id) ?? 0;
      const now = Date.now();
      const item = wanted.find((q) => readyAt(q) <= now);
      if (!item) {
        const next = wanted.reduce((a, b) => (readyAt(b) < readyAt(a) ? b : a));
        this.log.debug({ result: next.result_id, wait_ms: readyAt(next) - now }, 'result waits before its upload (the node may be starting its next job)');
        await this.pause(readyAt(next) - now);
        continue;
      }
      this.notBefore.delete(item.result_id);
      try {
        if ((await work(item)) === 'done') {
          this.remove(item);
          this.delivered++;
          this.log.debug({ result: item.result_id }, 'result uploaded to the portal');
          for (const fn of [...this.listeners]) fn(item.result_id);
        }
        failuresInARow = 0;
      } catch (e) {
        if (this.stopping) break;
        if (e instanceof Undeliverable) {
          this.log.warn({ result: item.result_id, why: e.message }, 'result not uploaded to the portal');
          this.remove(item);
          continue;
        }
        this.failures++;
        failuresInARow++;
        const delay = this.backoff(failuresInARow);
        this.log.warn({ result: item.result_id, lane: name, err: (e as Error).message, retry_in_ms: delay }, 'uploading a result to the portal failed; will retry');
        // To the back: one result that keeps failing does not hold up the others.
        if (this.queue.length > 1 && this.queue.includes(item)) {
          this.queue = [...this.queue.filter((q) => q !== item), item];
          this.persist();
        }
        await this.pause(delay);
      }
    }
  }

  /** Jittered exponential back-off: min * 2^(n-1), capped, times 0.5..1. */
  private backoff(n: number): number {
    const full = Math.min(this.retry.maxMs, this.retry.minMs * 2 ** Math.min(n - 1, 30));
    return Math.round(full * (0.5 + 0.5 * this.random()));
  }

  /** Wait `ms` (or until work arrives when undefined); a nudge or stop ends it early. */
  private pause(ms: number | undefined): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (): void => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      if (ms !== undefined) timer = setTimeout(done, ms);
      this.wakers.add(done);
      if (this.stopping) done();
    });
  }

  private remove(item: QueuedResult): void {
    this.queue = this.queue.filter((q) => q !== item);
    this.persist();
  }

  /** Write the queue as it is now; writes go one after the other, each the newest state. */
  private persist(): void {
    this.writes = this.writes
      .then(() => writeFileAtomic(this.o.queueFile, JSON.stringify({ version: 1, since: this.since ?? null, results: this.queue }) + '\n'))
      .catch((e: unknown) => this.log.error({ err: e }, 'could not write the upload queue'));
  }

  // -------------------------------------------------------------- one result

  /** The node's record of a queued result; Undeliverable once the node deleted it. */
  private recordOf(id: string): ResultRecord {
    const rec = this.o.results.get(id);
    if (rec === undefined || rec === 'deleted') throw new Undeliverable(rec === 'deleted' ? 'deleted on the node (retention) before it was uploaded' : 'unknown on the node');
    return rec;
  }

  /** Every file is on the portal: it writes the record it has from the node's stream and serves the files itself. */
  private async complete(id: string): Promise<void> {
    const res = await this.request('POST', `${this.resultUrl(id)}/complete`);
    if (res.status === 410) throw new Undeliverable(`the portal deleted it (retention): ${(await res.text()).slice(0, 300)}`);
    if (!res.ok) throw new PortalError(res.status, await res.text(), `completing ${id}`);
    await res.body?.cancel();
  }

  /** Every file not yet whole on the portal, then `complete`: the files are the portal's. */
  private async deliver(item: QueuedResult): Promise<'done'> {
    const id = item.result_id;
    this.recordOf(id);
    let listing;
    try {
      listing = await this.o.results.artifacts(id);
    } catch (e) {
      if (e instanceof FarmError && (e.code === 'gone' || e.code === 'not_found')) throw new Undeliverable(e.message);
      throw e;
    }
    for (const rel of Object.keys(listing)) {
      if (item.done.includes(rel)) continue;
      const file = await this.o.results.openArtifact(id, rel);
      if (!file) continue; // gone since the listing (retention freeing space)
      await this.uploadFile(id, rel, file.path);
      item.done.push(rel);
      this.persist();
    }
    await this.complete(id);
    return 'done';
  }

  private async uploadFile(id: string, rel: string, path: string): Promise<void> {
    const url = `${this.resultUrl(id)}/files/${rel.split('/').map(encodeURIComponent).join('/')}`;
    const fh = await openRegular(path);
    try {
      const size = (await fh.stat()).size;
      const buf = Buffer.allocUnsafe(Math.max(1, Math.min(this.chunkBytes, size)));
      const sha256 = await hashOf(fh, size, buf, this.abort.signal);
      let offset = await this.offsetOf(url, `status of ${rel}`);
      if (offset > size) {
        // The portal holds more than the file has: its partial file is not this file; start again.
        await this.expect(await this.request('DELETE', url), `discarding ${rel}`);
        offset = 0;
      }
      while (offset < size) {
        this.abort.signal.throwIfAborted(); // stop() does not wait for the rest of a large file
        const n = await readAt(fh, buf, Math.min(buf.length, size - offset), offset);
        if (n === 0) throw new Error(`${rel} became shorter while it was uploaded`);
        const res = await this.request('PUT', `${url}?offset=${offset}`, buf.subarray(0, n), 'application/octet-stream');
        const text = await res.text();
        if (res.status !== 200 && res.status !== 409) throw new PortalError(res.status, text, `sending ${rel} at ${offset}`);
        // 409: the portal holds another amount (a chunk cut short, an answer lost): go on from its offset.
        const next = (JSON.parse(text) as { offset?: unknown }).offset;
        if (typeof next !== 'number' || next > size) throw new PortalError(res.status, text, `sending ${rel} at ${offset}`);
        offset = next;
      }
      const done = await this.request('POST', url, JSON.stringify({ sha256 }), 'application/json');
      // 400 on a checksum mismatch: the portal discarded its copy; the retry sends the file again.
      await this.expect(done, `completing ${rel}`);
    } finally {
      await fh.close();
    }
  }

  private async offsetOf(url: string, what: string): Promise<number> {
    const res = await this.request('GET', url);
    const text = await res.text();
    if (!res.ok) throw new PortalError(res.status, text, what);
    const offset = (JSON.parse(text) as { offset?: unknown }).offset;
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) throw new PortalError(res.status, text, what);
    return offset;
  }

  private async expect(res: Response, what: string): Promise<void> {
    const text = await res.text();
    if (!res.ok) throw new PortalError(res.status, text, what);
  }

  private resultUrl(id: string): string {
    return `${this.base}/farm/v1/results${id}`;
  }

  private request(method: string, url: string, body?: string | Uint8Array, type?: string): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `node ${this.o.credential}`, 'X-Farmhand-Node': this.o.nodeId };
    if (type) headers['Content-Type'] = type;
    return fetch(url, { method, headers, body: body as BodyInit | undefined, signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]) });
  }
}

async function loadQueue(file: string, log: Logger): Promise<{ results: QueuedResult[]; since: string | undefined }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { results: [], since: undefined };
    throw e;
  }
  try {
    const raw = JSON.parse(text) as { results?: unknown; since?: unknown };
    if (!Array.isArray(raw.results)) throw new Error('no results array');
    const results = raw.results
      .filter((r): r is QueuedResult => typeof r === 'object' && r !== null && typeof (r as QueuedResult).result_id === 'string')
      .map((r) => ({ result_id: r.result_id, done: Array.isArray(r.done) ? r.done.filter((d) => typeof d === 'string') : [] }));
    return { results, since: typeof raw.since === 'string' ? raw.since : undefined };
  } catch (e) {
    // Written atomically, so only a hand edit breaks it: say so and start empty rather than not start.
    log.error({ file, err: (e as Error).message }, 'the upload queue file is not valid; starting with an empty queue');
    return { results: [], since: undefined };
  }
}

async function readAt(fh: FileHandle, buf: Buffer, length: number, position: number): Promise<number> {
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got;
}

async function hashOf(fh: FileHandle, size: number, buf: Buffer, signal: AbortSignal): Promise<string> {
  const hash = createHash('sha256');
  for (let pos = 0; pos < size; ) {
    signal.throwIfAborted();
    const n = await readAt(fh, buf, Math.min(buf.length, size - pos), pos);
    if (n === 0) break;
    hash.update(buf.subarray(0, n));
    pos += n;
  }
  return hash.digest('hex');
}
