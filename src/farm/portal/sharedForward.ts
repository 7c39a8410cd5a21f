/**
 * Identical long polls share one forwarded request. `await_completion` is
 * the case: 1,000 waiters of ten jobs through the portal are ten long polls
 * to the nodes, not 1,000, so a job's end is 10 answers for the node and the
 * portal to pass on instead of 1,000 (docs/farm.md, "await_completion
 * through the portal").
 *
 * A request joins one with the same key (node, path and query, user, base
 * URL, passed headers) started less than `joinMs` ago and not yet answered;
 * each gets the whole answer. A request after the answer, or later than
 * `joinMs`, starts its own: a joiner never gets an answer older than itself,
 * and its 202 ("still running, ask again") comes at most `joinMs` before
 * the 55 s a request of its own would wait. The forwarded request is
 * cancelled once every client of it has gone.
 */

/** A small answer read whole (a Job object). */
export interface SmallAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

interface Shared {
  started: number;
  clients: number;
  ac: AbortController;
  answer: Promise<SmallAnswer>;
}

export class SharedForwards {
  private readonly open = new Map<string, Shared>();
  /** Requests that started a forward, and requests that joined one. */
  readonly stats = { forwarded: 0, joined: 0 };

  constructor(private readonly o: { joinMs: number; now?: () => number }) {}

  /** Clients waiting on forwards not yet answered. */
  waiting(): number {
    let n = 0;
    for (const s of this.open.values()) n += s.clients;
    return n;
  }

  /**
   * The answer for `key`: a forward started less than `joinMs` ago, else a new one from `start`. Call `leave`
   * when the client goes away before the answer (the last to leave cancels the forward).
   */
  join(key: string, start: (signal: AbortSignal) => Promise<SmallAnswer>): { answer: Promise<SmallAnswer>; leave: () => void } {
    const now = (this.o.now ?? Date.now)();
    let s = this.open.get(key);
    if (!s || s.ac.signal.aborted || now - s.started > this.o.joinMs) {
      const ac = new AbortController();
      const created: Shared = { started: now, clients: 0, ac, answer: start(ac.signal) };
      const forget = () => {
        if (this.open.get(key) === created) this.open.delete(key);
      };
      created.answer.then(forget, forget);
      this.open.set(key, created);
      this.stats.forwarded++;
      s = created;
    } else {
      this.stats.joined++;
    }
    const shared = s;
    shared.clients++;
    let left = false;
    return {
      answer: shared.answer,
      leave: () => {
        if (left) return;
        left = true;
        if (--shared.clients === 0) shared.ac.abort();
      },
    };
  }
}
