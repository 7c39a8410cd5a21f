/**
 * Observing the services for metrics without changing them: the composition
 * root hands the domain wrapped ports, and each wrapper tells FarmMetrics
 * what passed through. The domain never sees prom-client.
 */
import type { ResultRecord } from '../core/model.js';
import type { ResultRepository } from '../core/ports.js';
import type { IrTransport } from '../hardware/ir/transports/types.js';
import type { FarmMetrics } from './metrics.js';

/**
 * The repository, whose `add` counts each run once it is stored (a record
 * that could not be written is no recorded run). Every other method is the
 * repository's own, `this` included.
 */
export function observeResults<R extends ResultRepository>(repo: R, metrics: FarmMetrics): R {
  const add = repo.add.bind(repo);
  return new Proxy(repo, {
    get(target, prop, receiver) {
      if (prop === 'add') {
        return async (record: ResultRecord) => {
          await add(record);
          metrics.recordRun(record);
        };
      }
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The transport, whose sends are timed and counted as key presses (a press is one `send` or `sendKey`). */
export function observeIrTransport(t: IrTransport, metrics: FarmMetrics): IrTransport {
  const timed = async (work: () => Promise<void>): Promise<void> => {
    const start = performance.now();
    try {
      await work();
    } catch (e) {
      metrics.recordPress(t.uri, false, (performance.now() - start) / 1000);
      throw e;
    }
    metrics.recordPress(t.uri, true, (performance.now() - start) / 1000);
  };
  const sendKey = t.sendKey?.bind(t);
  const holdKey = t.holdKey?.bind(t);
  const holdTrains = t.holdTrains?.bind(t);
  return {
    get uri() {
      return t.uri;
    },
    send: (trains, opts) => timed(() => t.send(trains, opts)),
    ...(sendKey && { sendKey: (remote: string, key: string, opts?: Parameters<typeof sendKey>[2]) => timed(() => sendKey(remote, key, opts)) }),
    ...(holdKey && { holdKey: (remote: string, key: string, opts: Parameters<typeof holdKey>[2]) => timed(() => holdKey(remote, key, opts)) }),
    ...(holdTrains && { holdTrains: (trains: Parameters<typeof holdTrains>[0], opts: Parameters<typeof holdTrains>[1]) => timed(() => holdTrains(trains, opts)) }),
    close: () => t.close(),
    // CEC, Roku and ADB press by name from their own key map (src/hardware/ir/keys.ts reads it).
    ...(t.keyMap && { keyMap: t.keyMap }),
  };
}
