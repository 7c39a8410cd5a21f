/**
 * The config's `power.uri`: the outlet feeding the device under test (src/hardware/power, docs/power.md).
 *
 *   none                                              no outlet (the default)
 *   virtual:                                          the virtual set-top box's mains
 *   snmp://[community@]host[:port]/<outlet>[?mib=apc-rpdu|apc-spdu&version=1|2c]
 *                                                     APC-style SNMP PDU (community default "private")
 *   netio+http(s)://[user:pass@]host[:port]/<outlet>  Netio JSON API (/netio.json)
 *   aviosys+http(s)://[user:pass@]host[:port]/<outlet>[?base=61|60]
 *                                                     Aviosys IP Power 9258 (set.cmd SetPower/GetPower)
 *   shelly+http(s)://[user:pass@]host[:port]/<relay>  Shelly Gen1 (/relay/N?turn=on)
 *   shelly2+http(s)://host[:port]/<switch id>         Shelly Gen2/Plus RPC (Switch.Set, Switch.GetStatus)
 *   tasmota+http(s)://[user:pass@]host[:port]/<n>     Tasmota (/cm?cmnd=Power<n> On)
 *
 * Every network form also takes `timeout=<secs>` (each request's limit, default 5, at most 60) and
 * `off_secs=<secs>` (how long a power-cycle leaves the outlet off, default 5, at most 600).
 * A URI that does not parse is refused when the configuration loads, with the reason.
 */
import { z } from 'zod';

export type PowerFamily = 'snmp' | 'netio' | 'aviosys' | 'shelly' | 'shelly2' | 'tasmota';

export interface NetworkPowerUri {
  family: PowerFamily;
  /** http: or https: for the HTTP families; unused for SNMP. */
  protocol: 'http:' | 'https:' | 'udp:';
  host: string;
  port: number;
  /** Outlet, relay or switch number as the device counts it. */
  outlet: number;
  /** The SNMP community, or the HTTP user and password; never logged. */
  user?: string;
  password?: string;
  timeoutMs: number;
  offSecs: number;
  /** Family options: `mib`, `version` (SNMP), `base` (Aviosys). */
  options: Record<string, string>;
}

export type ParsedPowerUri = { family: 'none' } | { family: 'virtual' } | NetworkPowerUri;

const FAMILIES: Record<string, PowerFamily> = {
  snmp: 'snmp',
  netio: 'netio',
  aviosys: 'aviosys',
  shelly: 'shelly',
  shelly2: 'shelly2',
  tasmota: 'tasmota',
};
/** Options each family accepts besides timeout and off_secs, with their allowed values. */
const FAMILY_OPTIONS: Partial<Record<PowerFamily, Record<string, RegExp>>> = {
  snmp: { mib: /^(apc-rpdu|apc-spdu)$/, version: /^(1|2c)$/ },
  aviosys: { base: /^(60|61)$/ },
};
const COMMON_OPTIONS = ['timeout', 'off_secs'];
/** The first outlet number each family has (Shelly counts relays from 0). */
const FIRST_OUTLET: Record<PowerFamily, number> = { snmp: 1, netio: 1, aviosys: 1, shelly: 0, shelly2: 0, tasmota: 1 };

/** The grammar's one-line summary, for error messages. */
export const POWER_URI_FORMS =
  'none, virtual:, snmp://[community@]host[:port]/<outlet>, netio+http://[user:pass@]host/<outlet>, ' +
  'aviosys+http://[user:pass@]host/<outlet>, shelly+http://host/<relay>, shelly2+http://host/<switch>, tasmota+http://host/<n>';

/** Parse an outlet's URI (`power.uri`, `power.outlets`); throws an Error saying what is wrong and what to write instead. */
export function parsePowerUri(uri: string): ParsedPowerUri {
  if (uri === 'none') return { family: 'none' };
  if (uri === 'virtual:') return { family: 'virtual' };
  const m = /^([a-z0-9]+)(?:\+(https?))?:\/\//.exec(uri);
  const family = m && FAMILIES[m[1]!];
  if (!m || !family) throw new Error(`unknown URI scheme; use one of: ${POWER_URI_FORMS}`);
  if (family === 'snmp' ? m[2] !== undefined : m[2] === undefined) {
    throw new Error(family === 'snmp' ? 'snmp:// takes no +http' : `write ${m[1]}+http:// or ${m[1]}+https://`);
  }
  let u: URL;
  try {
    u = new URL(`${family === 'snmp' ? 'http' : m[2]}://${uri.slice(m[0].length)}`);
  } catch {
    throw new Error(`the URI is not valid after "${m[0]}"; expected host[:port]/<outlet>`);
  }
  return networkUri(family, u, family === 'snmp' ? 'udp:' : (u.protocol as 'http:' | 'https:'));
}

function networkUri(family: PowerFamily, u: URL, protocol: NetworkPowerUri['protocol']): NetworkPowerUri {
  if (!u.hostname) throw new Error('the URI needs a host');
  const path = /^\/(\d{1,4})$/.exec(u.pathname);
  if (!path) throw new Error(`the URI needs the outlet number as its path, e.g. ${family === 'snmp' ? 'snmp://pdu.lab/3' : `${family}+http://host/1`}`);
  const outlet = Number(path[1]);
  if (outlet < FIRST_OUTLET[family]) throw new Error(`${family} outlets count from ${FIRST_OUTLET[family]}`);
  if (family === 'snmp' && u.password) throw new Error('snmp:// takes a community before "@", no password');
  if (family === 'shelly2' && u.username) throw new Error('shelly2 (Gen2 RPC) uses digest authentication, which farmhand does not speak yet: turn the device\'s authentication off or put it behind a trusted network');
  const options: Record<string, string> = {};
  const allowed = FAMILY_OPTIONS[family] ?? {};
  for (const [k, v] of u.searchParams) {
    if (!COMMON_OPTIONS.includes(k) && !allowed[k]) throw new Error(`option "${k}" is not known for ${family}; known: ${[...COMMON_OPTIONS, ...Object.keys(allowed)].join(', ')}`);
    if (allowed[k] && !allowed[k].test(v)) throw new Error(`option ${k}=${v} is not one of ${allowed[k].source}`);
    options[k] = v;
  }
  const timeoutMs = seconds(options.timeout, 5, 60, 'timeout') * 1000;
  const offSecs = seconds(options.off_secs, 5, 600, 'off_secs');
  const user = u.username ? decodeURIComponent(u.username) : family === 'snmp' ? 'private' : undefined;
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  const port = u.port ? Number(u.port) : family === 'snmp' ? 161 : protocol === 'https:' ? 443 : 80;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  return { family, protocol, host, port, outlet, timeoutMs, offSecs, options, ...(user !== undefined && { user }), ...(password !== undefined && { password }) };
}

function seconds(v: string | undefined, dflt: number, max: number, name: string): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!/^\d+(\.\d+)?$/.test(v) || n > max || (name === 'timeout' && n <= 0)) throw new Error(`option ${name}=${v} must be a number of seconds${name === 'timeout' ? ' above 0' : ''}, at most ${max}`);
  return n;
}

/** The URI with its credentials (community, user, password) replaced by `***`: what logs and answers show. */
export function redactPowerUri(uri: string): string {
  return uri.replace(/^([a-z0-9+]+:\/\/)[^/@?#]*@/i, '$1***@');
}

/** The zod check of an outlet's URI: parsePowerUri's reason, with the URI shown without its credentials. */
function parsedIn(ctx: z.RefinementCtx, uri: string): ParsedPowerUri | undefined {
  try {
    return parsePowerUri(uri);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: `${(e as Error).message} (${JSON.stringify(redactPowerUri(uri))})` });
    return undefined;
  }
}

/** `none`, `virtual:` or one of the network forms above. */
export const powerUri = z
  .string()
  .superRefine((v, ctx) => void parsedIn(ctx, v))
  .default('none');

const OUTLET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A named outlet's URI: a network PDU's (`virtual:` is the virtual box's own outlet, `power.uri`; `none` is no outlet). */
const namedPowerUri = z.string().superRefine((v, ctx) => {
  const family = parsedIn(ctx, v)?.family;
  if (family === 'none' || family === 'virtual') ctx.addIssue({ code: 'custom', message: `a named outlet is a network PDU's outlet, not ${JSON.stringify(v)} (that is power.uri's)` });
});

/** `power.outlets`: other outlets by name (`stbt.PDU("router")`), each a network PDU's. */
export const powerOutlets = z
  .record(z.string(), namedPowerUri)
  .superRefine((outlets, ctx) => {
    for (const name of Object.keys(outlets)) {
      if (!OUTLET_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'an outlet name is 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit' });
    }
  })
  .default({});
