/**
 * One queue per PDU: the requests to one device (host and port) run one at a time, in the order
 * they were made, whichever outlet of it they are for. Cheap PDUs answer one request at a time
 * or drop a second one, and an outlet switched while another request is half-way can end in an
 * unknown state; a queue costs nothing on a node that has one outlet.
 *
 * A request that fails does not stop the queue: the next one runs.
 */

const queues = new Map<string, Promise<unknown>>();

/** The queue's key for a device: its host (lower case) and port. */
export const pduKey = (host: string, port: number): string => `${host.toLowerCase()}:${port}`;

/** Run `fn` once every earlier request to the same PDU has ended; resolves or rejects as `fn` does. */
export function serialised<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = queues.get(key) ?? Promise.resolve();
  const run = before.then(fn, fn);
  // The tail the next request waits on: settled either way, and dropped once nothing waits behind it.
  const tail = run.then(
    () => undefined,
    () => undefined,
  );
  queues.set(key, tail);
  void tail.then(() => {
    if (queues.get(key) === tail) queues.delete(key);
  });
  return run;
}

/** How many PDUs have a request running or waiting (for tests: 0 once all settled). */
export const busyPdus = (): number => queues.size;
