/**
 * HTTP-controlled outlets, one small table entry per family; every request goes through `call`
 * (Node's fetch, a timeout, HTTP Basic credentials in a header), and no URL, header or answer with
 * credentials in it is ever put in an error or a log.
 *
 * - netio:   Netio JSON API. GET /netio.json -> {"Outputs":[{"ID":1,"State":1,..}]};
 *            POST /netio.json {"Outputs":[{"ID":1,"Action":1}]} (Action 0 off, 1 on).
 * - aviosys: Aviosys IP Power 9258. GET /set.cmd?cmd=getpower -> "p61=1,p62=0,..";
 *            GET /set.cmd?cmd=setpower+p61=1. Outlet n is p6<n> (base 61), or p6<n-1> with base=60
 *            (older firmware counts P60..P63).
 * - shelly:  Shelly Gen1. GET /relay/<n>?turn=on|off and GET /relay/<n> -> {"ison":true,..}.
 * - shelly2: Shelly Gen2/Plus RPC. GET /rpc/Switch.Set?id=<n>&on=true|false;
 *            GET /rpc/Switch.GetStatus?id=<n> -> {"output":true,..}.
 * - tasmota: Tasmota. GET /cm?cmnd=Power<n>%20On|Off and GET /cm?cmnd=Power<n> -> {"POWER<n>":"ON"}
 *            ({"POWER":"ON"} on a one-relay device); credentials go as user= and password=, as
 *            Tasmota's web server wants them.
 */
import { FarmError } from '../../core/errors.js';
import type { NetworkPowerUri, PowerFamily } from '../../config/uris/power.js';
import type { OutletSwitch } from './switch.js';

interface HttpRequest {
  path: string;
  method?: 'GET' | 'POST';
  body?: string;
}

interface Family {
  read(n: number, u: NetworkPowerUri): HttpRequest;
  write(n: number, on: boolean, u: NetworkPowerUri): HttpRequest;
  /** The outlet's state in the device's answer; undefined when the answer is not one. */
  state(body: string, n: number, u: NetworkPowerUri): boolean | undefined;
}

const json = (body: string): unknown => {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
};
const field = (v: unknown, k: string): unknown => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[k] : undefined);
const asBool = (v: unknown): boolean | undefined => (typeof v === 'boolean' ? v : undefined);

const aviosysPort = (n: number, u: NetworkPowerUri): string => `p${(u.options.base === '60' ? 59 : 60) + n}`;
const tasmotaAuth = (u: NetworkPowerUri): string =>
  u.user === undefined ? '' : `&user=${encodeURIComponent(u.user)}&password=${encodeURIComponent(u.password ?? '')}`;

const FAMILIES: Record<Exclude<PowerFamily, 'snmp'>, Family> = {
  netio: {
    read: () => ({ path: '/netio.json' }),
    write: (n, on) => ({ path: '/netio.json', method: 'POST', body: JSON.stringify({ Outputs: [{ ID: n, Action: on ? 1 : 0 }] }) }),
    state: (body, n) => {
      const outputs = field(json(body), 'Outputs');
      const out: unknown = Array.isArray(outputs) ? (outputs as unknown[]).find((o) => field(o, 'ID') === n) : undefined;
      const s = field(out, 'State');
      return s === 1 ? true : s === 0 ? false : undefined;
    },
  },
  aviosys: {
    read: () => ({ path: '/set.cmd?cmd=getpower' }),
    write: (n, on, u) => ({ path: `/set.cmd?cmd=setpower+${aviosysPort(n, u)}=${on ? 1 : 0}` }),
    state: (body, n, u) => {
      const m = new RegExp(`\\b${aviosysPort(n, u)}\\s*=\\s*([01])\\b`, 'i').exec(body);
      return m ? m[1] === '1' : undefined;
    },
  },
  shelly: {
    read: (n) => ({ path: `/relay/${n}` }),
    write: (n, on) => ({ path: `/relay/${n}?turn=${on ? 'on' : 'off'}` }),
    state: (body) => asBool(field(json(body), 'ison')),
  },
  shelly2: {
    read: (n) => ({ path: `/rpc/Switch.GetStatus?id=${n}` }),
    write: (n, on) => ({ path: `/rpc/Switch.Set?id=${n}&on=${on}` }),
    state: (body) => asBool(field(json(body), 'output')),
  },
  tasmota: {
    read: (n, u) => ({ path: `/cm?cmnd=Power${n}${tasmotaAuth(u)}` }),
    write: (n, on, u) => ({ path: `/cm?cmnd=Power${n}%20${on ? 'On' : 'Off'}${tasmotaAuth(u)}` }),
    state: (body, n) => {
      const v = json(body);
      const s = field(v, `POWER${n}`) ?? (n === 1 ? field(v, 'POWER') : undefined);
      return s === 'ON' ? true : s === 'OFF' ? false : undefined;
    },
  },
};

export function httpSwitch(u: NetworkPowerUri): OutletSwitch {
  const family = FAMILIES[u.family as Exclude<PowerFamily, 'snmp'>];
  const where = `the ${u.family} outlet at ${u.protocol}//${u.host.includes(':') ? `[${u.host}]` : u.host}:${u.port} (outlet ${u.outlet})`;
  const call = (r: HttpRequest) => httpCall(u, r, where);
  const parse = (body: string): boolean => {
    const s = family.state(body, u.outlet, u);
    if (s === undefined) throw new FarmError('device_unavailable', `${where} answered, but not as a ${u.family} device with outlet ${u.outlet} does: check the family in power.uri and the outlet number`);
    return s;
  };
  return {
    key: { host: u.host, port: u.port },
    read: async () => parse(await call(family.read(u.outlet, u))),
    async write(on) {
      const body = await call(family.write(u.outlet, on, u));
      // Shelly Gen2's Switch.Set answers the state before ({"was_on":..}): only the others are checked here.
      if (u.family !== 'shelly2' && u.family !== 'aviosys') parse(body);
    },
  };
}

async function httpCall(u: NetworkPowerUri, r: HttpRequest, where: string): Promise<string> {
  const headers: Record<string, string> = {};
  if (u.user !== undefined && u.family !== 'tasmota') headers.authorization = `Basic ${Buffer.from(`${u.user}:${u.password ?? ''}`).toString('base64')}`;
  if (r.body !== undefined) headers['content-type'] = 'application/json';
  const host = u.host.includes(':') ? `[${u.host}]` : u.host;
  let res: Response;
  let body: string;
  try {
    res = await fetch(`${u.protocol}//${host}:${u.port}${r.path}`, { method: r.method ?? 'GET', headers, ...(r.body !== undefined && { body: r.body }), redirect: 'error', signal: AbortSignal.timeout(u.timeoutMs) });
    body = await res.text();
  } catch (e) {
    throw networkError(e, where, u.timeoutMs);
  }
  if (res.status === 401 || res.status === 403) throw new FarmError('device_unavailable', `${where} refused the credentials (HTTP ${res.status}): check user:password in power.uri`);
  if (!res.ok) throw new FarmError('device_unavailable', `${where} answered HTTP ${res.status}: check the family and outlet in power.uri`);
  return body;
}

function networkError(e: unknown, where: string, timeoutMs: number): FarmError {
  const err = e as Error & { cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return new FarmError('device_unavailable', `${where} did not answer within ${timeoutMs / 1000} s: check its address and that it is on`);
  const why = err.cause?.code ?? err.cause?.message ?? err.message;
  return new FarmError('device_unavailable', `cannot reach ${where} (${why}): check its address and that it is on`);
}
