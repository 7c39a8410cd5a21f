import { expect } from 'chai';
import { formatJobUid, formatResultId, isCanonicalResultId, parseJobUid, parseResultId, runStamp, secondsStamp, stampSeconds } from '../../src/core/ids.js';

describe('identifiers', () => {
  it('job_uid is /<node_id>/<hex>/<number> and "always starts with /" (COMPAT)', () => {
    const uid = formatJobUid({ nodeId: 'farmhand-0a1b2c3d4e5f', hex: 'beef', number: 12 });
    expect(uid).to.equal('/farmhand-0a1b2c3d4e5f/beef/12');
    expect(parseJobUid(uid)).to.deep.equal({ nodeId: 'farmhand-0a1b2c3d4e5f', hex: 'beef', number: 12 });
    expect(parseJobUid(uid.slice(1))).to.deep.equal(parseJobUid(uid));
  });

  it('result_id is the job_uid followed by a UTC run timestamp <date>_<hh.mm.ss>', () => {
    const id = formatResultId('/n/beef/3', new Date('2026-11-23T09:05:07.900Z'));
    expect(id).to.equal('/n/beef/3/2026-11-23_09.05.07');
    expect(parseResultId(id)).to.deep.include({ jobUid: '/n/beef/3', stamp: '2026-11-23_09.05.07' });
    expect(runStamp(new Date('2026-01-02T03:04:05Z'))).to.equal('2026-01-02_03.04.05');
  });

  it('refuses anything else, so no request id can become a path outside its folder', () => {
    for (const bad of ['/n/beef', '/n/beef/0', '/n/BEEF/1', '/../beef/1', '/n/beef/1/..', '/n/beef/1/2026-11-23_09.05.07/x', '/n/beef/1/../../etc', '/n/beef/1e3']) {
      expect(parseResultId(bad) ?? parseJobUid(bad), bad).to.equal(undefined);
    }
  });

  it('one parser for HTTP and storage: a result id also gives its folder and its start in seconds', () => {
    expect(parseResultId('/n/beef/3/2026-11-23_09.05.07')).to.deep.equal({
      job: { nodeId: 'n', hex: 'beef', number: 3 },
      jobUid: '/n/beef/3',
      stamp: '2026-11-23_09.05.07',
      relDir: 'beef/3/2026-11-23_09.05.07',
      seconds: Date.parse('2026-11-23T09:05:07Z') / 1000,
    });
    expect(secondsStamp(stampSeconds('2026-11-23_09.05.07')!)).to.equal('2026-11-23_09.05.07');
  });

  it('a stamp must be a real UTC time, the hex the installation\'s 4 digits, and an id not absurdly long', () => {
    for (const bad of ['/n/beef/1/2026-02-30_00.00.00', '/n/beef/1/2026-01-01_24.00.00', '/n/bee/1/2026-01-01_00.00.00', '/n/beef0/1/2026-01-01_00.00.00']) {
      expect(parseResultId(bad), bad).to.equal(undefined);
    }
    expect(parseResultId(`/n/beef/1/2026-01-01_00.00.00${'/x'.repeat(200)}`)).to.equal(undefined);
    expect(parseJobUid(42)).to.equal(undefined);
  });

  it('isCanonicalResultId (the index load\'s check, which remembers the last job and date) agrees with parseResultId on every id, in any order', () => {
    const ids = [
      '/n/beef/1/2026-01-01_00.00.00',
      '/n/beef/1/2026-01-01_23.59.59',
      '/n/beef/1/2026-01-01_24.00.00',
      '/n/beef/1/2026-01-01_12.60.00',
      '/n/beef/1/2026-01-01_12.00.60',
      '/n/beef/1/2026-01-01_1.00.000',
      '/n/beef/1/2026-01-01_12:00:00',
      '/n/beef/1/2026-01-01_12.00.00x',
      '/n/beef/01/2026-01-01_00.00.00',
      'n/beef/1/2026-01-01_00.00.00',
      '/n/beef/1/2026-02-30_00.00.00',
      '/n/beef/1/2026-02-28_00.00.00',
      '/n/BEEF/1/2026-02-28_00.00.00',
      '/n/beef/2/2026-02-28_00.00.01',
      '/n/beef/2026-02-28_00.00.01',
      '/2026-02-28_00.00.01',
      '/n/beef/1/2/2026-02-28_00.00.01',
      '//beef/1/2026-02-28_00.00.01',
    ];
    const expected = (id: string) => {
      const p = parseResultId(id);
      return p !== undefined && `${p.jobUid}/${p.stamp}` === id;
    };
    // Each id after each other one, so every cached job and date meets every next id.
    for (const a of ids) {
      for (const b of ids) {
        expect(isCanonicalResultId(a), a).to.equal(expected(a));
        expect(isCanonicalResultId(b), `${b} after ${a}`).to.equal(expected(b));
      }
    }
  });
});
