/**
 * The run log in a client's zone (`<tool>.log?tz=`): stamps rewritten,
 * microseconds and every other byte kept; checked against luxon.
 */
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { expect } from 'chai';
import { DateTime } from 'luxon';
import { FarmError } from '../../src/core/errors.js';
import { convertLogTz, createLogTzTransform } from '../../src/http/formats/logTz.js';
import { formatMicros } from '../../src/runner/runLogs.js';

const conv = (text: string | Buffer, tz: string) => convertLogTz(Buffer.from(text), tz).toString('latin1');

describe('run log time zones (GET .../<tool>.log?tz=)', () => {
  it('"query tz sets the time zone of the timestamps": +00:00 stamps become local with their offset, microseconds kept', () => {
    expect(conv('2026-11-23T09:19:15.123456+00:00 hello\n', 'Europe/Berlin')).to.equal('2026-11-23T10:19:15.123456+01:00 hello\n');
    expect(conv('2026-07-01T09:19:15.000001+00:00 summer\n', 'Europe/Berlin')).to.equal('2026-07-01T11:19:15.000001+02:00 summer\n');
    expect(conv('2026-11-23T23:30:00.999999+00:00 x\n', 'Asia/Tokyo')).to.equal('2026-11-24T08:30:00.999999+09:00 x\n');
    expect(conv('2026-01-01T02:15:00.500000+00:00 y\n', 'America/St_Johns')).to.equal('2025-12-31T22:45:00.500000-03:30 y\n');
  });

  it('follows a DST change between two lines of one log', () => {
    const log = '2026-03-29T00:59:59.999999+00:00 before\n2026-03-29T01:00:00.000000+00:00 after\n';
    expect(conv(log, 'Europe/Berlin')).to.equal('2026-03-29T01:59:59.999999+01:00 before\n2026-03-29T03:00:00.000000+02:00 after\n');
  });

  it('agrees with luxon for stamps all over a year in zones with odd offsets', () => {
    for (const tz of ['America/St_Johns', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'Pacific/Chatham', 'America/Los_Angeles']) {
      const micros = Array.from({ length: 500 }, (_, i) => BigInt(Date.UTC(2026, 0, 1)) * 1000n + BigInt(i) * 63_113_904_123n);
      const out = conv(micros.map((m) => `${formatMicros(m)} line\n`).join(''), tz).split('\n');
      micros.forEach((m, i) => {
        const want = DateTime.fromMillis(Number(m / 1000n), { zone: tz }).toFormat("yyyy-MM-dd'T'HH:mm:ss");
        const frac = String(m % 1_000_000n).padStart(6, '0');
        const offset = DateTime.fromMillis(Number(m / 1000n), { zone: tz }).toFormat('ZZ');
        expect(out[i], `${tz} ${formatMicros(m)}`).to.equal(`${want}.${frac}${offset} line`);
      });
    }
  });

  it('passes bytes that are not UTF-8 through unchanged', () => {
    const message = Buffer.from([0x20, 0xff, 0xfe, 0xc3, 0x28, 0x80, 0x0a]); // invalid UTF-8, then the newline
    const log = Buffer.concat([Buffer.from('2026-11-23T09:19:15.123456+00:00'), message]);
    const out = convertLogTz(log, 'Europe/Berlin');
    expect(out.subarray(0, 32).toString()).to.equal('2026-11-23T10:19:15.123456+01:00');
    expect(out.subarray(32).equals(message)).to.equal(true);
  });

  it('leaves lines without a timestamp, stamps inside a line and other offsets alone', () => {
    const log = [
      'no stamp here',
      'x 2026-11-23T09:19:15.123456+00:00 not at the start',
      '2026-11-23T09:19:15.123456+02:00 another offset',
      '2026-11-23T09:19:15+00:00 no fraction',
      '2026-11-23T09:19:15.123456+00:00x glued',
      '',
      '2026-11-23T09:19:15.123456+00:00', // a stamp with nothing after it
      '2026-11-23T09:19:15.123456+00:00 crlf\r',
      '2026-11-23T09:19:15.1234',
    ].join('\n');
    const out = conv(log, 'Asia/Tokyo').split('\n');
    expect(out.slice(0, 6)).to.deep.equal(log.split('\n').slice(0, 6));
    expect(out.slice(6)).to.deep.equal(['2026-11-23T18:19:15.123456+09:00', '2026-11-23T18:19:15.123456+09:00 crlf\r', '2026-11-23T09:19:15.1234']);
  });

  it('tz=UTC gives back the stored bytes', () => {
    const log = Buffer.from('2026-11-23T09:19:15.123456+00:00 a\n2026-11-23T09:19:16.000000+00:00 b\n');
    expect(convertLogTz(log, 'UTC').equals(log)).to.equal(true);
    expect(convertLogTz(Buffer.alloc(0), 'Europe/Berlin')).to.have.length(0);
  });

  it('the stream form gives the same bytes however the log is cut into chunks', async () => {
    const log = Buffer.from(
      '2026-11-23T09:59:59.123456+00:00 a\xff\n\n2026-11-23T10:00:00.000001+00:00 b\nplain\n2026-11-23T10:00:01.000001+00:00 tail',
      'latin1',
    );
    const want = convertLogTz(log, 'Europe/Berlin');
    for (let size = 1; size <= log.length; size++) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < log.length; i += size) chunks.push(log.subarray(i, i + size));
      const got = await buffer(Readable.from(chunks).pipe(createLogTzTransform('Europe/Berlin')));
      expect(got.equals(want), `chunk size ${size}`).to.equal(true);
    }
  });

  it('an unknown tz is invalid_request (400)', () => {
    expect(() => convertLogTz(Buffer.from('x'), 'Europe/Atlantis')).to.throw(FarmError).with.property('code', 'invalid_request');
    expect(() => createLogTzTransform('Europe/Atlantis')).to.throw(FarmError).with.property('code', 'invalid_request');
  });

  // Its speed (<= 2 s) is a figure of bench/micro-bench.ts, not an assertion here.
  it('converts a 50 MB log, every byte but the stamps kept', () => {
    const lines: string[] = [];
    let micros = BigInt(Date.UTC(2026, 2, 28, 23)) * 1000n; // runs across Berlin's DST change
    for (let i = 0; i < 20_000; i++) {
      micros += 4_321n;
      lines.push(`${formatMicros(micros)} step ${i}: pressed KEY_OK, waiting for the menu to appear\n`);
    }
    const block = Buffer.from(lines.join(''));
    const log = Buffer.concat(Array.from({ length: Math.ceil((50 * 1024 * 1024) / block.length) }, () => block));
    const out = convertLogTz(log, 'Europe/Berlin');
    expect(out.length).to.equal(log.length);
    expect(out.subarray(0, 33).toString()).to.equal('2026-03-29T00:00:00.004321+01:00 ');
  });
});
