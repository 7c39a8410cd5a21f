import { expect } from 'chai';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { formatMicros, MAX_LINE_BYTES, RunClock, RunLogs } from '../../src/runner/runLogs.js';

const STAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;

/** Split a timestamped log into [stamp, text] pairs. */
function lines(buf: Buffer): [string, string][] {
  return buf
    .toString('latin1')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)]);
}

/** A run clock the test moves by hand. */
class ManualClock extends RunClock {
  constructor(public now: bigint) {
    super();
  }
  override nowMicros(): bigint {
    return this.now;
  }
}

describe('runner: run logs', () => {
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(path.join(tmpdir(), 'farmhand-logs-'))));
  afterEach(() => rm(dir, { recursive: true, force: true }));
  const read = (name: string) => readFile(path.join(dir, name));

  it('formats "an ISO 8601 timestamp" with microseconds and a +00:00 offset', () => {
    expect(formatMicros(1_795_425_555_123_456n)).to.equal('2026-11-23T09:19:15.123456+00:00');
    expect(formatMicros(1_795_425_555_000_007n)).to.equal('2026-11-23T09:19:15.000007+00:00');
    expect(formatMicros(0n)).to.equal('1970-01-01T00:00:00.000000+00:00');
    // The run clock reads the wall clock: its stamp lies between two readings taken around it.
    const before = Date.now();
    const clock = new RunClock();
    const stamp = clock.stamp();
    const after = Date.now();
    expect(stamp).to.match(STAMP);
    expect(Date.parse(stamp.replace(/(\.\d{3})\d{3}/, '$1'))).to.be.within(before, after + 1);
    const a = clock.nowMicros();
    expect(clock.nowMicros() >= a, "monotonic").to.equal(true);
  });

  it('"each line is an ISO 8601 timestamp, a space, then the message": combined.log and farmhand.log; raw bytes in stdout.log/stderr.log', async () => {
    const logs = new RunLogs(dir, 1 << 20);
    logs.tool('Running tests/a.py::test_x at abc');
    logs.output('stdout', Buffer.from('first line\nsecond '));
    logs.output('stderr', Buffer.from('an error\n'));
    logs.output('stdout', Buffer.from('line\n\nafter blank\n'));
    await logs.close();
    expect((await read('stdout.log')).toString()).to.equal('first line\nsecond line\n\nafter blank\n');
    expect((await read('stderr.log')).toString()).to.equal('an error\n');
    const combined = lines(await read('combined.log'));
    expect(combined.map(([, t]) => t)).to.deep.equal(['first line', 'an error', 'second line', '', 'after blank']);
    for (const [stamp] of combined) expect(stamp).to.match(STAMP);
    const tool = lines(await read('farmhand.log'));
    expect(tool.map(([, t]) => t)).to.deep.equal(['Running tests/a.py::test_x at abc', 'first line', 'an error', 'second line', '', 'after blank']);
  });

  it('stamps a line with the arrival of its first byte', async () => {
    const clock = new ManualClock(1_795_425_555_000_000n);
    const logs = new RunLogs(dir, 1 << 20, clock);
    logs.output('stdout', Buffer.from('slow'));
    clock.now += 30_000n;
    logs.output('stdout', Buffer.from(' line\nnext\n'));
    await logs.close();
    const stamps = lines(await read('combined.log')).map(([stamp]) => stamp);
    expect(stamps).to.deep.equal(['2026-11-23T09:19:15.000000+00:00', '2026-11-23T09:19:15.030000+00:00']);
  });

  it('flushes a partial last line (no newline) at the end', async () => {
    const logs = new RunLogs(dir, 1 << 20);
    logs.output('stdout', Buffer.from('done\nno newline'));
    logs.endOfOutput();
    logs.tool('Finished');
    await logs.close();
    expect((await read('stdout.log')).toString()).to.equal('done\nno newline');
    expect(lines(await read('farmhand.log')).map(([, t]) => t)).to.deep.equal(['done', 'no newline', 'Finished']);
  });

  it('keeps bytes that are not valid UTF-8 as they are', async () => {
    const bad = Buffer.from([0x62, 0x61, 0x64, 0x20, 0xff, 0xfe, 0xc3, 0x28, 0x0a]);
    const logs = new RunLogs(dir, 1 << 20);
    logs.output('stdout', bad.subarray(0, 6)); // split inside the bad sequence
    logs.output('stdout', bad.subarray(6));
    await logs.close();
    expect(Buffer.compare(await read('stdout.log'), bad)).to.equal(0);
    const combined = await read('combined.log');
    expect(Buffer.compare(combined.subarray(combined.indexOf(0x20) + 1), bad)).to.equal(0);
  });

  /** Bytes of the four log files together. */
  const onDisk = async () => {
    let total = 0;
    for (const f of ['stdout.log', 'stderr.log', 'combined.log', 'farmhand.log']) total += (await read(f)).length;
    return total;
  };
  const NOTE = /reached the \d+-byte cap on the run's logs; the rest is dropped/;

  it('drops output once what it put on disk (all four logs, stamps included) reaches the cap, and a line says so', async () => {
    const logs = new RunLogs(dir, 400);
    logs.output('stdout', Buffer.from('0123456789\n'));
    logs.output('stderr', Buffer.from('abcdefghij\n'));
    logs.output('stdout', Buffer.from('KLMNOPQRSTUVWXYZ\n'.repeat(20)));
    logs.output('stdout', Buffer.from('never seen\n'));
    await logs.close();
    const stdout = (await read('stdout.log')).toString();
    expect(stdout).to.match(/^0123456789\nKLM/);
    expect(stdout).to.match(NOTE);
    expect(stdout).to.not.include('never seen');
    expect((await read('stderr.log')).toString()).to.match(/^abcdefghij\n\nfarmhand: /);
    const combined = lines(await read('combined.log')).map(([, t]) => t);
    expect(combined.slice(0, 2)).to.deep.equal(['0123456789', 'abcdefghij']);
    expect(combined.at(-1)).to.match(NOTE);
    const tool = lines(await read('farmhand.log')).map(([, t]) => t);
    expect(tool.at(-1)).to.match(/^\d+ bytes of output were dropped \(over the 400-byte cap on the run's logs\)$/);
    expect(logs.droppedBytes).to.be.greaterThan(11);
    // The test's share stays within the cap; farmhand's own closing lines are the only extra.
    const notes = Buffer.byteLength(tool.at(-1)!) + 4 * (Buffer.byteLength(combined.at(-1)!) + 34);
    expect(await onDisk()).to.be.at.most(400 + notes);
    expect(logs.bytesWritten).to.equal(await onDisk());
  });

  it('the cap holds for all logs together whatever the shape of the output: empty lines, long lines, both streams, actions', async () => {
    const cap = 64 * 1024;
    for (const shape of ['\n'.repeat(5000), 'x'.repeat(200_000), 'a line of text\n'.repeat(3000)]) {
      await rm(dir, { recursive: true, force: true });
      dir = await mkdtemp(path.join(tmpdir(), 'farmhand-logs-'));
      const logs = new RunLogs(dir, cap);
      logs.tool('Running tests/a.py::test_x at abc');
      for (let i = 0; i < 10; i++) {
        logs.output('stdout', Buffer.from(shape));
        logs.output('stderr', Buffer.from(shape));
        logs.event('press KEY_OK remote=r transport=virtual:');
      }
      logs.tool('Finished tests/a.py::test_x: pass');
      await logs.close();
      const total = await onDisk();
      expect(total, JSON.stringify(shape.slice(0, 10))).to.be.at.most(cap + 1024);
      expect(total).to.be.greaterThan(cap * 0.9); // and the room was used
      expect((await read('farmhand.log')).toString()).to.match(NOTE);
    }
  });

  it('test actions (event lines) go to farmhand.log only, on one line each, and count against the cap', async () => {
    const logs = new RunLogs(dir, 300);
    logs.event('press KEY_OK remote=r\ntransport=x');
    for (let i = 0; i < 100; i++) logs.event(`match images/ok.png: matched ${i}`);
    await logs.close();
    const tool = lines(await read('farmhand.log')).map(([, t]) => t);
    expect(tool[0]).to.equal('press KEY_OK remote=r transport=x');
    expect(tool.some((t) => NOTE.test(t))).to.equal(true);
    expect(tool.filter((t) => t.startsWith('match ')).length).to.be.within(1, 10);
    expect((await read('combined.log')).toString()).to.not.include('press');
  });

  it('cuts a very long line into pieces in the timestamped logs, without an extra blank line', async () => {
    const logs = new RunLogs(dir, 1 << 22);
    const long = Buffer.alloc(MAX_LINE_BYTES + 10, 0x61);
    logs.output('stdout', Buffer.concat([long, Buffer.from('\nshort\n')]));
    await logs.close();
    const combined = lines(await read('combined.log')).map(([, t]) => t.length);
    expect(combined).to.deep.equal([MAX_LINE_BYTES, 10, 5]);
    expect((await read('stdout.log')).length).to.equal(MAX_LINE_BYTES + 10 + 7);
  });

  it('a line exactly MAX_LINE_BYTES long is one line', async () => {
    const logs = new RunLogs(dir, 1 << 22);
    logs.output('stdout', Buffer.concat([Buffer.alloc(MAX_LINE_BYTES, 0x62), Buffer.from('\n')]));
    await logs.close();
    expect(lines(await read('combined.log')).map(([, t]) => t.length)).to.deep.equal([MAX_LINE_BYTES]);
  });

  it('close() rejects when the folder cannot be written, without throwing earlier', async () => {
    const logs = new RunLogs(path.join(dir, 'missing'), 100);
    logs.output('stdout', Buffer.from('x\n'));
    logs.tool('y');
    let err: unknown;
    await logs.close().catch((e: unknown) => (err = e));
    expect((err as NodeJS.ErrnoException | undefined)?.code).to.equal('ENOENT');
  });
});
