/**
 * The event journal's cost: `node --import tsx bench/event-journal-bench.ts [--events N] [--keep N] [--dir D]`.
 *
 * One hub, one subscriber that only counts (as the portal link's send does); `--events` (default 5,000)
 * run.finished-sized events published one by one, yielding to the event loop every 10 (so the grouped
 * fdatasync runs between them, as between a job's runs), first without a journal, then with one in a
 * temporary folder under `--dir` (default the system's; pass a folder on the data disk to measure that disk).
 * `--keep` (default 1,000, events.buffer_size) sets the rotation. Prints median, p99 and max of one
 * `publish()` each way, and the fdatasyncs the journal made.
 *   - with the journal, median <= 0.2 ms and p99 <= 2 ms per publish (a node publishes a few events a second).
 * Exit status: 0 all targets met, 1 a target missed, 2 the benchmark failed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { EventHub } from '../src/core/events.js';
import { FileEventJournal } from '../src/storage/eventJournal.js';
import { percentile, Targets } from './lib/stats.js';

const arg = (name: string, dflt: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1]! : dflt);
const EVENTS = Number(arg('--events', '5000'));
const KEEP = Number(arg('--keep', '1000'));
const BASE = arg('--dir', os.tmpdir());
const targets = new Targets();

const finished = (i: number) => ({
  job_uid: '/bench-node/0a1b/1',
  result_id: `/bench-node/0a1b/1/2030-01-01_00.00.${String(i % 60).padStart(2, '0')}`,
  test_case: 'tests/menu.py::test_open_the_settings_menu_and_check_every_item',
  result: 'fail' as const,
  failure_reason: 'MatchTimeout: Didn\'t find match for "images/settings-selected.png" within 10 seconds.',
  infrastructure_error: null,
  start_time: '2030-01-01T00:00:00.000Z',
  end_time: '2030-01-01T00:00:12.345Z',
  duration: 12.345,
});

async function measure(hub: EventHub): Promise<number[]> {
  let got = 0;
  hub.subscribe(() => got++);
  const ms: number[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const t = performance.now();
    hub.publish('run.finished', finished(i));
    ms.push(performance.now() - t);
    if (i % 10 === 9) await yieldNow();
  }
  if (got !== EVENTS) throw new Error(`the subscriber got ${got} of ${EVENTS}`);
  return ms;
}

const fmt = (xs: number[]) => `median ${percentile(xs, 50).toFixed(3)} ms  p99 ${percentile(xs, 99).toFixed(3)} ms  max ${Math.max(...xs).toFixed(3)} ms  (n=${xs.length})`;

async function main(): Promise<void> {
  const root = await mkdtemp(path.join(BASE, 'farmhand-journal-bench-'));
  try {
    const plain = await measure(new EventHub({ nodeId: 'bench-node', bufferSize: KEEP }));
    console.log(`without journal: ${fmt(plain)}`);
    const { journal, history } = await FileEventJournal.open({ dir: path.join(root, 'events'), keep: KEEP, nodeId: 'bench-node' });
    const withJ = await measure(new EventHub({ nodeId: 'bench-node', bufferSize: KEEP, journal, history }));
    const t = performance.now();
    await journal.close();
    console.log(`with journal:    ${fmt(withJ)}  (${journal.syncs} fdatasyncs; close, the last: ${(performance.now() - t).toFixed(1)} ms)`);
    targets.check('publish with the journal, median', percentile(withJ, 50), '<=', 0.2, 'ms', `${(percentile(withJ, 50) - percentile(plain, 50)).toFixed(3)} ms more than without`);
    targets.check('publish with the journal, p99', percentile(withJ, 99), '<=', 2, 'ms', `without: ${percentile(plain, 99).toFixed(3)} ms`);
    targets.printSummary();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
  process.exitCode = targets.missed.length ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
