/**
 * Preloaded into a benchmarked daemon (`node --import <this file> ...`):
 * on SIGUSR2 it writes the process's memory breakdown (process.memoryUsage
 * and V8's heap spaces, in bytes) as JSON to $FARMHAND_BENCH_MEM_FILE, so the
 * benchmark can say where resident memory goes without touching src/.
 * Plain JavaScript, so it loads with or without tsx.
 */
import { writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';

const file = process.env.FARMHAND_BENCH_MEM_FILE;
if (file) {
  process.on('SIGUSR2', () => {
    // With --expose-gc (the farm soak), heap figures after a full collection: live objects only.
    globalThis.gc?.();
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]));
    writeFileSync(file, JSON.stringify({ ...process.memoryUsage(), spaces }));
  });
}
