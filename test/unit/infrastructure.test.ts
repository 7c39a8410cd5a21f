import { expect } from 'chai';
import {
  classifyOutcome,
  INFRASTRUCTURE_KINDS,
  infrastructureKindOf,
  infrastructureReason,
  kindOfRecord,
} from '../../src/core/infrastructure.js';
import { DAEMON_RESTARTED, DISK_FULL } from '../../src/core/jobs.js';
import { presentResultDetail } from '../../src/http/presenters.js';
import { resultRecord } from '../fixtures/records.js';

describe('infrastructure errors (core/infrastructure.ts)', () => {
  it('every kind makes a reason that names it back', () => {
    for (const kind of INFRASTRUCTURE_KINDS) {
      const reason = infrastructureReason(kind, 'what happened: details');
      expect(reason).to.equal(`InfrastructureError: ${kind}: what happened: details`);
      expect(infrastructureKindOf(reason)).to.equal(kind);
    }
  });

  it('reasons of the script, unknown kinds and the old "disk full" wording are not infrastructure errors', () => {
    expect(infrastructureKindOf('AssertionError: InfrastructureError: capture_lost: x')).to.equal(null);
    expect(infrastructureKindOf('InfrastructureError: cosmic_ray: x')).to.equal(null);
    expect(infrastructureKindOf('InfrastructureError: capture_lost')).to.equal(null); // no ": " after the kind
    expect(infrastructureKindOf(null)).to.equal(null);
    expect(infrastructureKindOf(undefined)).to.equal(null);
  });

  it('the daemon-restart and disk-full reasons of the job loop carry their kinds', () => {
    expect(infrastructureKindOf(DAEMON_RESTARTED)).to.equal('daemon_restart');
    expect(infrastructureKindOf(`${DISK_FULL}: the data disk filled up during this run`)).to.equal('disk_full');
  });

  it('a record stored before the field existed reads its kind from the reason; a stored kind wins', () => {
    expect(kindOfRecord({ failure_reason: DAEMON_RESTARTED })).to.equal('daemon_restart');
    expect(kindOfRecord({ failure_reason: 'RuntimeError: x' })).to.equal(null);
    expect(kindOfRecord({ failure_reason: 'RuntimeError: x', infrastructure_error: 'ir_transport' })).to.equal('ir_transport');
    expect(kindOfRecord({ failure_reason: DAEMON_RESTARTED, infrastructure_error: null })).to.equal(null);
  });

  describe('classifyOutcome', () => {
    const fault = { kind: 'ir_transport' as const, detail: 'IR transport failed during a key press (KEY_OK): IR Toy was disconnected' };

    it('a fail during a fault becomes an error of the fault kind that keeps the test\'s own outcome', () => {
      const o = classifyOutcome({ result: 'fail', failure_reason: 'AssertionError: no menu', traceback: 'tb', exit_status: 1 }, [fault]);
      expect(o.result).to.equal('error');
      expect(infrastructureKindOf(o.failure_reason)).to.equal('ir_transport');
      expect(o.failure_reason).to.contain("the test's own outcome was fail: AssertionError: no menu");
      expect(o).to.include({ traceback: 'tb', exit_status: 1 });
    });

    it('a pass stands; no fault changes nothing; an infrastructure error keeps its own kind', () => {
      const pass = { result: 'pass' as const, failure_reason: null, traceback: null, exit_status: 0 };
      expect(classifyOutcome(pass, [fault])).to.deep.equal(pass);
      const err = { result: 'error' as const, failure_reason: 'RuntimeError: x', traceback: null, exit_status: 1 };
      expect(classifyOutcome(err, [])).to.deep.equal(err);
      const infra = { ...err, failure_reason: infrastructureReason('runner_timeout', 'could not start python') };
      expect(classifyOutcome(infra, [fault])).to.deep.equal(infra);
    });
  });

  it('the result detail shows the kind in v1 and v2 (null for the script\'s own errors)', () => {
    const r = resultRecord({ result: 'error', failure_reason: DAEMON_RESTARTED });
    expect(presentResultDetail(r, {}, 'http://x', 'v1')).to.include({ infrastructure_error: 'daemon_restart' });
    expect(presentResultDetail(r, {}, 'http://x', 'v2')).to.include({ infrastructure_error: 'daemon_restart' });
    expect(presentResultDetail(resultRecord(), {}, 'http://x', 'v2')).to.include({ infrastructure_error: null });
  });
});
