/**
 * Maintenance, the pure part (src/core/maintenance.ts): the body's rules, the service's switch and what the
 * availability says (docs/api-notes.md, "Maintenance"). The daemon and the portal: test/http/maintenance.test.ts,
 * test/farm/maintenance.test.ts.
 */
import { expect } from 'chai';
import { availabilityText, asAvailability } from '../../src/core/availability.js';
import { FarmError } from '../../src/core/errors.js';
import { MaintenanceService, maintenanceDetail, parseMaintenanceRequest, type MaintenanceState } from '../../src/core/maintenance.js';

describe('maintenance (core)', () => {
  it('parses on with a message (trimmed) and off (a message ignored)', () => {
    expect(parseMaintenanceRequest({ on: true, message: '  new blaster  ' })).to.deep.equal({ on: true, message: 'new blaster' });
    expect(parseMaintenanceRequest({ on: false })).to.deep.equal({ on: false, message: null });
    expect(parseMaintenanceRequest({ on: false, message: 'done' })).to.deep.equal({ on: false, message: null });
  });

  it('refuses each bad body with invalid_request naming what to fix', () => {
    const cases: [unknown, RegExp][] = [
      [null, /JSON object/],
      [[], /JSON object/],
      [{}, /on is required/],
      [{ on: 1, message: 'x' }, /on is required/],
      [{ on: true }, /message is required/],
      [{ on: true, message: ' ' }, /message is required/],
      [{ on: true, message: 'x'.repeat(501) }, /at most 500/],
      [{ on: true, message: 'two\nlines' }, /one line/],
      [{ on: true, message: 'x', until: 'friday' }, /unknown field "until"/],
      [{ on: false, message: 3 }, /message must be a string/],
    ];
    for (const [body, re] of cases) {
      let err: unknown;
      try {
        parseMaintenanceRequest(body);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(body)).to.be.instanceOf(FarmError);
      expect((err as FarmError).code).to.equal('invalid_request');
      expect((err as FarmError).message, JSON.stringify(body)).to.match(re);
    }
  });

  it('switches on and off, saving each state; starts from what the store holds', async () => {
    const saved: (MaintenanceState | null)[] = [];
    const store = { load: () => null, save: async (m: MaintenanceState | null) => void saved.push(m) };
    const svc = new MaintenanceService({ store, now: () => Date.UTC(2026, 10, 26, 12, 0, 0) });
    expect(svc.current()).to.equal(null);
    const on = await svc.set({ on: true, message: 'rewiring' }, 'ada');
    expect(on).to.deep.equal({ before: null, after: { message: 'rewiring', by: 'ada', since: '2026-11-26T12:00:00.000Z' } });
    expect(svc.current()).to.deep.equal(on.after);
    await svc.set({ on: false, message: null }, 'ada');
    expect(svc.current()).to.equal(null);
    expect(saved).to.deep.equal([on.after, null]);
    const again = new MaintenanceService({ store: { load: () => on.after, save: async () => undefined } });
    expect(again.current()).to.deep.equal(on.after);
  });

  it('a failed save leaves the state as it was (the caller gets the error)', async () => {
    const svc = new MaintenanceService({ store: { load: () => null, save: () => Promise.reject(new FarmError('storage_full', 'disk full')) } });
    let err: unknown;
    await svc.set({ on: true, message: 'x' }, 'ada').catch((e: unknown) => (err = e));
    expect((err as FarmError).code).to.equal('storage_full');
    expect(svc.current()).to.equal(null);
  });

  it('the availability kind maintenance: its reason text, and a known kind for the portal', () => {
    const m = { message: 'rewiring', by: 'ada', since: '2026-11-26T12:00:00.000Z' };
    const a = { kind: 'maintenance' as const, detail: maintenanceDetail(m) };
    expect(availabilityText(a)).to.equal('in maintenance: rewiring (ada, since 2026-11-26T12:00:00.000Z)');
    expect(asAvailability(a)).to.deep.equal(a);
  });
});
