/**
 * The node's power outlet: what feeds the device under test, switched on a
 * test script's request (`stbt.PDU`, the control request `power`).
 *
 * `power.uri` chooses it:
 * - `none` (the default): no outlet; a test that asks is refused with a
 *   clear `not_found` ("this node has no power outlet").
 * - `virtual:`: the virtual set-top box's mains (docs/virtual-stb.md): off
 *   is no picture at all and no key obeyed; on is a cold boot.
 *
 * Network PDUs (SNMP, HTTP) come as further drivers behind the same
 * interface.
 */
import { FarmError } from '../../core/errors.js';

export interface PowerOutlet {
  /** The configured `power.uri`, for the run's log. */
  readonly uri: string;
  /** True when the outlet is on. */
  get(): Promise<boolean>;
  /** Switch the outlet and resolve with the state read back once it holds. */
  set(on: boolean): Promise<boolean>;
}

/** What a `virtual:` outlet feeds: the virtual set-top box's mains. */
export interface MainsPowered {
  mains(on?: boolean): boolean;
}

export const POWER_URI_PATTERN = /^(none|virtual:)$/;

/** The outlet of `power.uri`, or undefined for `none`. */
export function createPowerOutlet(uri: string, o: { virtualStb?: MainsPowered } = {}): PowerOutlet | undefined {
  if (uri === 'none') return undefined;
  if (uri === 'virtual:') {
    const stb = o.virtualStb;
    if (!stb) throw new FarmError('invalid_request', 'power.uri "virtual:" needs the virtual set-top box (capture.uri or ir.uri "virtual:")');
    return {
      uri,
      get: () => Promise.resolve(stb.mains()),
      set: (on: boolean) => Promise.resolve(stb.mains(on)),
    };
  }
  throw new FarmError('invalid_request', `unknown power.uri ${JSON.stringify(uri)}; use "none" or "virtual:"`);
}
