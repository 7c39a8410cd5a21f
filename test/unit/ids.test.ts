import { expect } from 'chai';
import { formatJobUid, formatResultId, parseJobUid, parseResultId, runStamp } from '../../src/core/ids.js';

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
});
