/**
 * A process's resources as one stack: each is opened in order by a function
 * that hands back its value and how to close it, and the stack closes them in
 * reverse order, each close awaited before the next, a failing close logged
 * without skipping the others. The same list undoes a start that failed
 * half-way and stops the running process, so the two cannot drift apart: what
 * was opened first (the data directory's lock) is closed last, after every
 * write (docs/robustness.md, "Start-up and stopping").
 */
import type { Logger } from '../core/ports.js';

/** What an opener hands back: the value, and how to close it (awaited when it returns a promise). */
export interface Opened<T> {
  value: T;
  close: () => unknown;
}

/** A step of the stack, as `onEvent` is told of it. */
export type ResourceEvent =
  | { type: 'opened'; name: string; value: unknown }
  | { type: 'closing' | 'closed'; name: string }
  | { type: 'close-failed'; name: string; error: unknown };

export interface ResourceStackOptions {
  logger: Logger;
  /**
   * Told of every step, in order. What it throws at an `opened` event fails that open, after the
   * resource joined the stack (so it is closed with the rest): the tests' way of failing a start at a
   * chosen step. What it throws at a close event is ignored.
   */
  onEvent?: (e: ResourceEvent) => void;
}

export class ResourceStack {
  private readonly entries: Array<{ name: string; close: () => unknown }> = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly o: ResourceStackOptions) {}

  /** Open a resource: `make` opens it; once it resolves, the resource is closed with the stack. */
  async open<T>(name: string, make: () => Opened<T> | Promise<Opened<T>>): Promise<T> {
    if (this.closing) throw new Error(`cannot open ${name}: the process is stopping`);
    const { value, close } = await make();
    this.push(name, close, value);
    return value;
  }

  /** A close with nothing to open (something built already, or a point in the stopping order). */
  defer(name: string, close: () => unknown): void {
    if (this.closing) throw new Error(`cannot open ${name}: the process is stopping`);
    this.push(name, close, undefined);
  }

  private push(name: string, close: () => unknown, value: unknown): void {
    this.entries.push({ name, close });
    this.o.onEvent?.({ type: 'opened', name, value });
  }

  /** The names opened so far, in order. */
  names(): string[] {
    return this.entries.map((e) => e.name);
  }

  /** Close everything, last opened first; resolves once every close has ended. Called again, the same promise. */
  close(): Promise<void> {
    return (this.closing ??= this.closeAll());
  }

  private async closeAll(): Promise<void> {
    for (const { name, close } of [...this.entries].reverse()) {
      this.tell({ type: 'closing', name });
      this.o.logger.debug({ resource: name }, 'closing');
      try {
        await close();
        this.tell({ type: 'closed', name });
      } catch (error) {
        this.o.logger.warn({ err: error, resource: name }, `closing ${name} failed; closing the rest`);
        this.tell({ type: 'close-failed', name, error });
      }
    }
  }

  private tell(e: ResourceEvent): void {
    try {
      this.o.onEvent?.(e);
    } catch {
      // A listener's failure must not stop the closing.
    }
  }
}
