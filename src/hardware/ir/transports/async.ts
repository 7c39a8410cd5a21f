/**
 * Small promise helpers the transports share: abortable sleeps and waits, a
 * queue that runs sends one at a time, and a buffered byte reader with
 * per-read timeouts (serial devices answer in bytes, not messages).
 *
 * Every abort rejects with the signal's reason, the way `fetch` does, so a
 * caller can tell its own abort from a device failure.
 */

/** The reason an aborted signal carries (an AbortError DOMException unless the caller gave one). */
const reasonOf = (signal: AbortSignal): unknown => signal.reason ?? new DOMException('aborted', 'AbortError');

/**
 * Settle with `p`, or reject with the signal's reason as soon as it aborts.
 * `p` keeps running: callers use this for waits whose outcome they may drop.
 */
export function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(reasonOf(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(reasonOf(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Resolve after `ms` (at once when `ms <= 0`); reject with the signal's reason on abort. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(reasonOf(signal));
  if (ms <= 0) return Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return abortable(done, signal).finally(() => clearTimeout(timer));
}

/** Resolve once `signal` aborts or `ms` have passed, whichever comes first (never rejects). */
export function heldUntil(ms: number, signal?: AbortSignal): Promise<void> {
  return sleep(ms, signal).catch(() => undefined);
}

/**
 * Runs tasks one at a time, in call order. A task whose signal aborts while
 * it waits for its turn rejects at once and never runs; the tasks after it
 * still wait for the ones before it.
 */
export class SerialQueue {
  private tail: Promise<void> = Promise.resolve();

  async run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const before = this.tail;
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    this.tail = before.then(() => mine);
    try {
      await abortable(before, signal);
      return await task();
    } finally {
      release();
    }
  }

  /** Resolves once every task queued so far has finished. */
  idle(): Promise<void> {
    return this.tail;
  }
}

interface PendingRead {
  count: number;
  resolve: (b: Buffer) => void;
  reject: (e: unknown) => void;
}

/**
 * Buffers bytes as they arrive and hands them out in exact counts. One read
 * may be pending at a time (the protocols here are strictly request/answer).
 * After `fail(e)`, pending and later reads reject with `e` until `reset()`.
 */
export class ByteReader {
  private buf: Buffer = Buffer.alloc(0);
  private pending: PendingRead | undefined;
  private failure: unknown;

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    this.settle();
  }

  /** Drop what has arrived but not been read (stale answers after a reset). */
  clear(): void {
    this.buf = Buffer.alloc(0);
  }

  /** Reject the pending read and every later one with `e` (the port went away). */
  fail(e: unknown): void {
    this.failure = e;
    const p = this.pending;
    this.pending = undefined;
    p?.reject(e);
  }

  /** Forget a failure and buffered bytes: a new port is attached. */
  reset(): void {
    this.failure = undefined;
    this.clear();
  }

  /**
   * The next `count` bytes. Rejects with `onTimeout()` when they have not all
   * arrived within `timeoutMs`, with the signal's reason on abort.
   */
  read(count: number, timeoutMs: number, onTimeout: () => unknown, signal?: AbortSignal): Promise<Buffer> {
    if (this.pending) return Promise.reject(new Error('ByteReader: a read is already pending'));
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.buf.length >= count) return Promise.resolve(this.take(count));
    let timer: NodeJS.Timeout | undefined;
    const p = new Promise<Buffer>((resolve, reject) => {
      this.pending = { count, resolve, reject };
      timer = setTimeout(() => {
        this.pending = undefined;
        reject(onTimeout());
      }, timeoutMs);
    });
    return abortable(p, signal).finally(() => {
      clearTimeout(timer);
      this.pending = undefined;
    });
  }

  private settle(): void {
    const p = this.pending;
    if (p && this.buf.length >= p.count) {
      this.pending = undefined;
      p.resolve(this.take(p.count));
    }
  }

  private take(count: number): Buffer {
    const out = this.buf.subarray(0, count);
    this.buf = this.buf.subarray(count);
    return out;
  }
}
