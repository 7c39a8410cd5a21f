/**
 * The node's power outlet: what feeds the device under test, switched on a
 * test script's request (`stbt.PDU`, the control request `power`).
 *
 * `power.uri` chooses it (the grammar: src/config/uris/power.ts, docs/power.md):
 * - `none` (the default): no outlet; a test that asks is refused with a
 *   clear `not_found` ("this node has no power outlet").
 * - `virtual:`: the virtual set-top box's mains (docs/virtual-stb.md): off
 *   is no picture at all and no key obeyed; on is a cold boot.
 * - `snmp://` (snmp.ts): an APC-style SNMP PDU.
 * - `netio+http://`, `aviosys+http://`, `shelly+http://`, `shelly2+http://`,
 *   `tasmota+http://` (http.ts): HTTP-controlled outlets.
 *
 * Every outlet: requests to one PDU run one at a time (serialise.ts); a
 * switch answers once the outlet reads the new state (or fails saying it
 * does not); a cycle is off, `off_secs`, on, and nothing else switches the
 * outlet in between. Failures are FarmError `device_unavailable` with what
 * to check, within the URI's timeout; `uri` has its credentials masked.
 */
import { FarmError } from '../../core/errors.js';
import { parsePowerUri, redactPowerUri, type NetworkPowerUri } from '../../config/uris/power.js';
import { httpSwitch } from './http.js';
import { pduKey, serialised } from './serialise.js';
import { snmpSwitch } from './snmp.js';
import type { OutletSwitch } from './switch.js';

export interface PowerOutlet {
  /** The configured `power.uri` with any credentials masked: for the run's log and answers. */
  readonly uri: string;
  /** How long `cycle()` leaves the outlet off unless told otherwise (the URI's `off_secs`, default 5). */
  readonly offSecs: number;
  /** True when the outlet is on. */
  get(): Promise<boolean>;
  /** Switch the outlet and resolve with the state read back once it holds. */
  set(on: boolean): Promise<boolean>;
  /** Off, wait `offSecs` (default: the outlet's), on; resolves with the state read back (true). */
  cycle(offSecs?: number): Promise<boolean>;
}

/** What a `virtual:` outlet feeds: the virtual set-top box's mains. */
export interface MainsPowered {
  mains(on?: boolean): boolean;
}

/** Default off time of a power-cycle: what APC PDUs use for their reboot. */
export const DEFAULT_OFF_SECS = 5;
/** Longest off time a cycle request may ask for. */
export const MAX_OFF_SECS = 600;

/** The outlet of `power.uri`, or undefined for `none`; a URI that does not parse throws `invalid_request`. */
export function createPowerOutlet(uri: string, o: { virtualStb?: MainsPowered } = {}): PowerOutlet | undefined {
  let parsed;
  try {
    parsed = parsePowerUri(uri);
  } catch (e) {
    throw new FarmError('invalid_request', `power.uri ${JSON.stringify(redactPowerUri(uri))}: ${(e as Error).message}`);
  }
  if (parsed.family === 'none') return undefined;
  if (parsed.family === 'virtual') {
    const stb = o.virtualStb;
    if (!stb) throw new FarmError('invalid_request', 'power.uri "virtual:" needs the virtual set-top box (capture.uri or ir.uri "virtual:")');
    return outletOf('virtual:', virtualSwitch(stb), { timeoutMs: 0, offSecs: DEFAULT_OFF_SECS });
  }
  return outletOf(redactPowerUri(uri), networkSwitch(parsed), parsed);
}

function networkSwitch(u: NetworkPowerUri): OutletSwitch {
  return u.family === 'snmp' ? snmpSwitch(u) : httpSwitch(u);
}

function virtualSwitch(stb: MainsPowered): OutletSwitch {
  return {
    key: { host: 'virtual', port: 0 },
    read: () => Promise.resolve(stb.mains()),
    write: (on) => {
      stb.mains(on);
      return Promise.resolve();
    },
  };
}

let outletSeq = 0;

/** A PowerOutlet over a driver's switch: the PDU's queue, the read-back, the cycle. */
export function outletOf(uri: string, sw: OutletSwitch, t: { timeoutMs: number; offSecs: number }): PowerOutlet {
  const pdu = pduKey(sw.key.host, sw.key.port);
  // Switches and cycles of this outlet take turns (a set during a cycle waits for its end).
  const own = `outlet#${++outletSeq}`;
  const read = () => serialised(pdu, () => sw.read());
  const switchTo = async (on: boolean): Promise<boolean> => {
    await serialised(pdu, () => sw.write(on));
    return settle(read, on, t.timeoutMs);
  };
  return {
    uri,
    offSecs: t.offSecs,
    get: read,
    set: (on) => serialised(own, () => switchTo(on)),
    cycle: (offSecs = t.offSecs) => {
      if (!(offSecs >= 0 && offSecs <= MAX_OFF_SECS)) return Promise.reject(new FarmError('invalid_request', `off_secs must be 0 to ${MAX_OFF_SECS} seconds`));
      return serialised(own, async () => {
        const off = await switchTo(false);
        if (off) throw new FarmError('device_unavailable', `the outlet (${uri}) still reads on after switching it off`);
        if (offSecs > 0) await new Promise((r) => setTimeout(r, offSecs * 1000));
        return switchTo(true);
      });
    },
  };
}

/**
 * Read the outlet until it reads `want` or `timeoutMs` passed (a PDU may take a moment to switch
 * a relay); resolves with the last state read, which the caller compares.
 */
async function settle(read: () => Promise<boolean>, want: boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  let wait = 50;
  for (;;) {
    const now = await read();
    if (now === want || Date.now() >= end) return now;
    await new Promise((r) => setTimeout(r, Math.min(wait, Math.max(0, end - Date.now()))));
    wait = Math.min(wait * 2, 500);
  }
}
