/**
 * In-process micro-benchmarks: `node --import tsx bench/micro-bench.ts [--runs N]`.
 *
 * The speed figures that used to be assertions in the unit tests (a loaded CI machine made them fail at
 * random); the tests keep what each one checked besides speed. Every figure is a median of `--runs`
 * (default 7), after a warm-up:
 *   - results.csv of 2,000 records in a zone with DST (`src/http/formats/csv.ts`): <= 20 ms;
 *   - a 50 MB run log converted to another zone (`src/http/formats/logTz.ts`): <= 2000 ms;
 *   - the signal monitor on 1080p frames (`src/hardware/capture/signal-monitor.ts`): <= 1 ms a frame;
 *   - the virtual set-top box's frame feed at 20 fps for 2 s (`src/hardware/virtual/`): 18-22 frames a second;
 *   - token verification with 0 and 40 characters of the secret right (`src/storage/tokens.ts`): the two
 *     medians differ by <= 50 % (a timing side channel would make the longer shared prefix slower).
 * Exit status: 0 all targets met, 1 a target missed, 2 the benchmark failed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseToken } from '../src/core/auth.js';
import { Writable } from 'node:stream';
import { createVirtualStb } from '../src/hardware/virtual/index.js';
import { SignalMonitor } from '../src/hardware/capture/signal-monitor.js';
import { resultsCsv } from '../src/http/formats/csv.js';
import { convertLogTz } from '../src/http/formats/logTz.js';
import { silentLogger } from '../src/logger.js';
import { formatMicros } from '../src/runner/runLogs.js';
import { FileTokenVerifier, TokenStore, tokensFile } from '../src/storage/tokens.js';
import { resultRecord } from '../test/fixtures/records.js';
import { formatSummary, summarize, Targets } from './lib/stats.js';

const arg = (name: string, dflt: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt);
const RUNS = arg('--runs', 7);
const targets = new Targets();

/** Milliseconds of each of `runs` calls of `fn`, after one untimed call. */
function timed(fn: () => void, runs = RUNS): number[] {
  fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  return times;
}

function csv(): void {
  const records = Array.from({ length: 2000 }, (_, i) => {
    const t = Date.UTC(2026, 10, 23) + i * 37_000;
    return resultRecord({
      start_time: new Date(t).toISOString(),
      end_time: new Date(t + 12_345).toISOString(),
      result: i % 3 === 0 ? 'fail' : 'pass',
      failure_reason: i % 3 === 0 ? 'AssertionError: menu "Guide", not found' : null,
      tags: { 'jenkins/BUILD_ID': String(i) },
    });
  });
  let text = '';
  const s = summarize(timed(() => (text = resultsCsv(records, { base: 'https://farm.example:8443', tz: 'Europe/Berlin' }))));
  if (text.split('\r\n').length !== 2002) throw new Error('results.csv: wrong row count');
  targets.check('results.csv, 2,000 rows, Europe/Berlin', s.median, '<=', 20, 'ms', formatSummary(s, 'ms'));
}

function logTz(): void {
  const lines: string[] = [];
  let micros = BigInt(Date.UTC(2026, 2, 28, 23)) * 1000n; // across Berlin's DST change
  for (let i = 0; i < 20_000; i++) {
    micros += 4_321n;
    lines.push(`${formatMicros(micros)} step ${i}: pressed KEY_OK, waiting for the menu to appear\n`);
  }
  const block = Buffer.from(lines.join(''));
  const log = Buffer.concat(Array.from({ length: Math.ceil((50 * 1024 * 1024) / block.length) }, () => block));
  let out: Buffer = Buffer.alloc(0);
  const s = summarize(timed(() => (out = convertLogTz(log, 'Europe/Berlin')), Math.min(RUNS, 5)));
  if (out.length !== log.length) throw new Error('logTz: the length changed');
  targets.check(`run log tz conversion, ${(log.length / 1048576).toFixed(0)} MB`, s.median, '<=', 2000, 'ms', formatSummary(s, 'ms', 0));
}

function signalMonitor(): void {
  const m = new SignalMonitor();
  const a = Buffer.alloc(1920 * 1080 * 3, 17);
  const b = Buffer.alloc(1920 * 1080 * 3, 200);
  let i = 0;
  const s = summarize(timed(() => {
    for (let k = 0; k < 200; k++, i++) m.observe(i % 2 ? a : b, i);
  }).map((ms) => ms / 200));
  targets.check('signal monitor, one 1080p frame', s.median, '<=', 1, 'ms', formatSummary(s, 'ms', 3));
}

async function vstbFeed(): Promise<void> {
  const box = createVirtualStb({ width: 160, height: 90, fps: 20 });
  try {
    while (box.currentFrame() === undefined) await new Promise((r) => setTimeout(r, 5));
    let frames = 0;
    const detach = box.feed(new Writable({ write: (_c: Buffer, _e, done) => (frames++, done()) }));
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 2000));
    detach();
    const fps = frames / ((performance.now() - t0) / 1000);
    targets.check('virtual box feed at 20 fps, low bound', fps, '>=', 18, 'fps', `${frames} frames in 2 s`);
    targets.check('virtual box feed at 20 fps, high bound', fps, '<=', 22, 'fps', `${frames} frames in 2 s`);
  } finally {
    box.stop();
  }
}

async function tokenTiming(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'farmhand-microbench-'));
  try {
    const { token } = await new TokenStore(tokensFile(dir)).create('alice');
    const v = new FileTokenVerifier(tokensFile(dir), silentLogger);
    const { secret } = parseToken(token)!;
    const prefix = token.slice(0, token.length - secret.length);
    const alt = (keep: number) => prefix + secret.slice(0, keep) + [...secret.slice(keep)].map((c) => (c === 'A' ? 'B' : 'A')).join('');
    const time = (t: string) => {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < 50; i++) v.verify(t);
      return Number(process.hrtime.bigint() - t0) / 50;
    };
    // Interleaved, so drift on a shared machine hits both alike.
    const none: number[] = [];
    const most: number[] = [];
    for (let i = 0; i < 200; i++) {
      none.push(time(alt(0)));
      most.push(time(alt(40)));
    }
    const [m0, m40] = [summarize(none).median, summarize(most).median];
    const diff = (100 * Math.abs(m40 - m0)) / Math.min(m0, m40);
    targets.check('token verify: 0 vs 40 characters of the secret right', diff, '<=', 50, '%', `median ${m0.toFixed(0)} ns vs ${m40.toFixed(0)} ns per verify`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  csv();
  logTz();
  signalMonitor();
  await vstbFeed();
  await tokenTiming();
  targets.printSummary();
  process.exitCode = targets.missed.length ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
