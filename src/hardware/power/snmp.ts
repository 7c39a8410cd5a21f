/**
 * APC-style SNMP PDUs (PowerNet-MIB), v1 or v2c, one outlet's control OID:
 * - `mib=apc-rpdu` (the default): Switched Rack PDUs (AP79xx, AP86xx),
 *   rPDUOutletControlOutletCommand 1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.<outlet>:
 *   set immediateOn (1) / immediateOff (2); get answers 1 when on, 2 when off.
 * - `mib=apc-spdu`: MasterSwitch (AP92xx), sPDUOutletCtl 1.3.6.1.4.1.318.1.1.4.4.2.1.3.<outlet>:
 *   set outletOn (1) / outletOff (2); get answers 1, 2, or 4 (outletUnknown).
 * One UDP session per request, closed after it, so nothing stays open between presses.
 */
import snmp, { type Session, type Varbind } from 'net-snmp';
import { FarmError } from '../../core/errors.js';
import type { NetworkPowerUri } from '../../config/uris/power.js';
import type { OutletSwitch } from './switch.js';

const CONTROL_OIDS: Record<string, string> = {
  'apc-rpdu': '1.3.6.1.4.1.318.1.1.12.3.3.1.1.4',
  'apc-spdu': '1.3.6.1.4.1.318.1.1.4.4.2.1.3',
};
const ON = 1;
const OFF = 2;
/** One retry after a lost datagram: the whole request takes at most twice `timeout`. */
const RETRIES = 1;

export function snmpSwitch(u: NetworkPowerUri): OutletSwitch {
  const mib = u.options.mib ?? 'apc-rpdu';
  const oid = `${CONTROL_OIDS[mib]}.${u.outlet}`;
  const where = `the SNMP PDU at ${u.host}:${u.port} (outlet ${u.outlet}, mib ${mib})`;
  return {
    key: { host: u.host, port: u.port },
    async read() {
      const vb = await snmpRequest(u, where, (s, done) => s.get([oid], done));
      const v = Number(vb.value);
      if (v !== ON && v !== OFF) throw new FarmError('device_unavailable', `${where} reports the outlet's state as ${String(vb.value)} (neither on nor off); check the PDU`);
      return v === ON;
    },
    async write(on) {
      await snmpRequest(u, where, (s, done) => s.set([{ oid, type: snmp.ObjectType.Integer, value: on ? ON : OFF }], done));
    },
  };
}

type Done = (e: Error | null, vbs?: Varbind[]) => void;

/** One request in a session of its own: the answer's first varbind, or a FarmError saying what to check. */
function snmpRequest(u: NetworkPowerUri, where: string, fn: (s: Session, done: Done) => void): Promise<Varbind> {
  return new Promise((resolve, reject) => {
    let session: Session;
    try {
      const version = u.options.version === '2c' ? snmp.Version2c : snmp.Version1;
      session = snmp.createSession(u.host, u.user ?? 'private', { port: u.port, retries: RETRIES, timeout: u.timeoutMs, version, transport: u.host.includes(':') ? 'udp6' : 'udp4' });
    } catch (e) {
      reject(new FarmError('device_unavailable', `${where}: ${(e as Error).message}`));
      return;
    }
    let settled = false;
    const finish: Done = (e, vbs) => {
      if (settled) return;
      settled = true;
      clearTimeout(guard);
      session.close();
      if (e) reject(snmpError(e, where, u.timeoutMs));
      else if (!vbs?.[0] || snmp.isVarbindError(vbs[0])) reject(new FarmError('device_unavailable', `${where} has no such outlet (${vbs?.[0] ? snmp.varbindError(vbs[0]) : 'empty answer'}); check the outlet number and mib`));
      else resolve(vbs[0]);
    };
    // net-snmp times out by itself; this guard only makes sure nothing it misses can hang a press.
    const guard = setTimeout(() => finish(new snmp.RequestTimedOutError('Request timed out')), u.timeoutMs * (RETRIES + 1) + 1000);
    session.on('error', (e) => finish(e));
    fn(session, finish);
  });
}

/** A clear message for each way an SNMP request fails; the community is never in it. */
function snmpError(e: Error, where: string, timeoutMs: number): FarmError {
  if (e instanceof snmp.RequestTimedOutError) {
    return new FarmError('device_unavailable', `${where} did not answer within ${(timeoutMs * (RETRIES + 1)) / 1000} s: check its address, that SNMP is on, and the community (a wrong community gets no answer)`);
  }
  if (e instanceof snmp.RequestFailedError) {
    return new FarmError('device_unavailable', `${where} refused the request (${e.message}): check that the community may write and that the outlet exists`);
  }
  return new FarmError('device_unavailable', `${where}: ${e.message}; check its address`);
}
