/**
 * Protocol peers for the power outlet tests and bench, on loopback:
 * - `startSnmpd`: net-snmp's real `snmpd` (Debian package "snmpd") on a free UDP port with a
 *   throwaway config whose `pass_persist` script emulates an APC PDU's outlet control OIDs
 *   (PowerNet-MIB rPDUOutletControlOutletCommand and sPDUOutletCtl, outlets 1-7 on at start, 8 reading
 *   outletUnknown until switched);
 *   each SET it takes is a line of `sets()`.
 * - `startHttpOutlets`: an HTTP server speaking each HTTP family's outlet protocol (Netio JSON,
 *   Aviosys set.cmd, Shelly Gen1 /relay, Shelly Gen2 RPC, Tasmota /cm) over 8 outlets, counting
 *   the requests it holds at once (`maxInFlight`), with optional credentials and a reply delay.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import snmp from 'net-snmp';

const RPDU = '.1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.';
const SPDU = '.1.3.6.1.4.1.318.1.1.4.4.2.1.3.';

/** The pass_persist script: snmpd's line protocol (PING, get, getnext, set) over stdin and stdout. */
const PASS_PERSIST = `
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
const [,, eventsFile] = process.argv;
const tables = [${JSON.stringify(RPDU)}, ${JSON.stringify(SPDU)}];
const state = new Map();
const outletOf = (oid) => {
  const t = tables.find((p) => oid.startsWith(p));
  const n = t && /^\\d+$/.test(oid.slice(t.length)) ? Number(oid.slice(t.length)) : 0;
  return n >= 1 && n <= 8 ? n : undefined;
};
let req = [];
const out = (s) => process.stdout.write(s + '\\n');
createInterface({ input: process.stdin }).on('line', (raw) => {
  const l = raw.trim();
  if (req.length === 0 && l === '') return;
  req.push(l);
  const [cmd, oid, value] = req;
  if (cmd === 'PING') { req = []; out('PONG'); return; }
  if ((cmd === 'get' || cmd === 'getnext') && req.length === 2) {
    req = [];
    const n = cmd === 'get' ? outletOf(oid) : undefined;
    // Outlet 8 starts in outletUnknown (4), as a PDU whose relay state it cannot tell.
    out(n === undefined ? 'NONE' : oid + '\\ninteger\\n' + (state.get(n) ?? (n === 8 ? 4 : 1)));
    return;
  }
  if (cmd === 'set' && req.length === 3) {
    req = [];
    const n = outletOf(oid);
    const [type, v] = value.split(' ');
    if (n === undefined) { out('not-writable'); return; }
    if (type !== 'integer' || !['1', '2', '3'].includes(v)) { out('wrong-value'); return; }
    state.set(n, v === '2' ? 2 : 1);
    appendFileSync(eventsFile, oid + ' ' + v + '\\n');
    out('DONE');
    return;
  }
  if (!['get', 'getnext', 'set'].includes(cmd)) req = [];
});
`;

export interface SnmpPeer {
  port: number;
  /** Each SET the agent took, in order: "<oid> <value>". */
  sets(): Promise<string[]>;
  stop(): Promise<void>;
}

/** A UDP port nothing listens on now (bound and released; snmpd takes it next). */
async function freeUdpPort(): Promise<number> {
  const s = createSocket('udp4');
  await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
  const { port } = s.address();
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** Until the agent answers a GET of outlet 1 (fails at once if snmpd exited). */
async function agentAnswers(port: number, community: string, child: ChildProcess): Promise<void> {
  const end = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`snmpd exited with ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = snmp.createSession('127.0.0.1', community, { port, retries: 0, timeout: 300 });
      s.on('error', () => undefined);
      s.get([`${RPDU.slice(1)}1`], (e) => {
        s.close();
        resolve(!e);
      });
    });
    if (ok) return;
    if (Date.now() > end) throw new Error('snmpd (Debian package "snmpd") did not answer on loopback within 15 s');
  }
}

export async function startSnmpd(community = 'private'): Promise<SnmpPeer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-snmpd-'));
  // snmpd writes its persistent snmpd.conf into SNMP_PERSISTENT_DIR: a folder of its own, not the config's.
  await mkdir(path.join(dir, 'state'));
  const events = path.join(dir, 'sets.log');
  await writeFile(events, '');
  await writeFile(path.join(dir, 'peer.mjs'), PASS_PERSIST);
  const port = await freeUdpPort();
  const conf = [`agentAddress udp:127.0.0.1:${port}`, `rwcommunity ${community} 127.0.0.1`, `pass_persist .1.3.6.1.4.1.318 ${process.execPath} ${path.join(dir, 'peer.mjs')} ${events}`];
  await writeFile(path.join(dir, 'agent.conf'), `${conf.join('\n')}\n`);
  const child = spawn('snmpd', ['-f', '-Lf', path.join(dir, 'snmpd.log'), '-C', '-c', path.join(dir, 'agent.conf')], {
    env: { ...process.env, SNMP_PERSISTENT_DIR: path.join(dir, 'state'), MIBS: '' },
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await agentAnswers(port, community, child);
  } catch (e) {
    await stop();
    throw e;
  }
  const sets = async () => (await readFile(events, 'utf8')).split('\n').filter(Boolean);
  return { port, sets, stop };
}

export interface HttpPeer {
  port: number;
  /** Outlet states by number (1-8; Shelly's relay/switch n is outlet n + 1). */
  outlets: Map<number, boolean>;
  /** Every request: method and path (query included). */
  requests: string[];
  /** Most requests held at once. */
  maxInFlight: number;
  stop(): Promise<void>;
}

export interface HttpPeerOptions {
  user?: string;
  password?: string;
  /** Hold each answer this long (ms): lets overlapping requests show in maxInFlight. */
  delayMs?: number;
  /** Answer every request with this status instead. */
  status?: number;
  /** Outlets whose relay is stuck: switching them is accepted and changes nothing. */
  stuck?: number[];
}

type Handler = (peer: HttpPeer, u: URL, body: string) => { status?: number; body: string } | undefined;

const stateOf = (peer: HttpPeer, n: number): boolean => peer.outlets.get(n) ?? false;

const ROUTES: Handler[] = [
  (p, u, body) => {
    if (u.pathname !== '/netio.json') return undefined;
    if (body) {
      const req = JSON.parse(body) as { Outputs?: Array<{ ID: number; Action: number }> };
      for (const o of req.Outputs ?? []) if (p.outlets.has(o.ID) && (o.Action === 0 || o.Action === 1)) p.outlets.set(o.ID, o.Action === 1);
    }
    const Outputs = [...p.outlets.keys()].map((ID) => ({ ID, Name: `output_${ID}`, State: stateOf(p, ID) ? 1 : 0, Action: 6 }));
    return { body: JSON.stringify({ Agent: { Model: 'NETIO 4' }, Outputs }) };
  },
  (p, u) => {
    if (u.pathname.toLowerCase() !== '/set.cmd') return undefined;
    const cmd = (u.search.match(/cmd=([^&]*)/i)?.[1] ?? '').toLowerCase();
    for (const [, n, v] of cmd.matchAll(/p6(\d)=([01])/g)) p.outlets.set(Number(n), v === '1');
    return { body: `<html>${[1, 2, 3, 4].map((n) => `p6${n}=${stateOf(p, n) ? 1 : 0}`).join(',')}</html>` };
  },
  (p, u) => {
    const m = /^\/relay\/(\d)$/.exec(u.pathname);
    if (!m) return undefined;
    const n = Number(m[1]) + 1;
    const turn = u.searchParams.get('turn');
    if (turn === 'on' || turn === 'off') p.outlets.set(n, turn === 'on');
    return { body: JSON.stringify({ ison: stateOf(p, n), has_timer: false, source: 'http' }) };
  },
  (p, u) => {
    if (!u.pathname.startsWith('/rpc/Switch.')) return undefined;
    const n = Number(u.searchParams.get('id')) + 1;
    if (u.pathname === '/rpc/Switch.GetStatus') return { body: JSON.stringify({ id: n - 1, source: 'http', output: stateOf(p, n) }) };
    const was = stateOf(p, n);
    p.outlets.set(n, u.searchParams.get('on') === 'true');
    return { body: JSON.stringify({ was_on: was }) };
  },
  (p, u) => {
    if (u.pathname !== '/cm') return undefined;
    const m = /^Power(\d)(?: (On|Off))?$/i.exec(u.searchParams.get('cmnd') ?? '');
    if (!m) return { body: JSON.stringify({ Command: 'Unknown' }) };
    const n = Number(m[1]);
    if (m[2]) p.outlets.set(n, m[2].toLowerCase() === 'on');
    return { body: JSON.stringify({ [`POWER${n}`]: stateOf(p, n) ? 'ON' : 'OFF' }) };
  },
];

function authorised(o: HttpPeerOptions, req: IncomingMessage, u: URL): boolean {
  if (o.user === undefined) return true;
  if (u.pathname === '/cm') return u.searchParams.get('user') === o.user && u.searchParams.get('password') === o.password;
  return req.headers.authorization === `Basic ${Buffer.from(`${o.user}:${o.password}`).toString('base64')}`;
}

export async function startHttpOutlets(o: HttpPeerOptions = {}): Promise<HttpPeer> {
  let inFlight = 0;
  const peer: HttpPeer = { port: 0, outlets: new Map([1, 2, 3, 4, 5, 6, 7, 8].map((n) => [n, true])), requests: [], maxInFlight: 0, stop: async () => undefined };
  const answer = (req: IncomingMessage, res: ServerResponse, body: string): void => {
    const u = new URL(req.url ?? '/', 'http://peer');
    const stuck = (o.stuck ?? []).map((n) => [n, stateOf(peer, n)] as const);
    const r = !authorised(o, req, u) ? { status: 401, body: 'Unauthorized' } : o.status ? { status: o.status, body: 'no' } : (ROUTES.map((h) => h(peer, u, body)).find(Boolean) ?? { status: 404, body: 'Not Found' });
    for (const [n, on] of stuck) peer.outlets.set(n, on);
    res.writeHead(r.status ?? 200, { 'content-type': r.body.startsWith('{') ? 'application/json' : 'text/html' }).end(r.body);
  };
  const server: Server = createServer((req, res) => {
    inFlight += 1;
    peer.maxInFlight = Math.max(peer.maxInFlight, inFlight);
    peer.requests.push(`${req.method} ${req.url}`);
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      setTimeout(() => {
        inFlight -= 1;
        answer(req, res, body);
      }, o.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  peer.port = (server.address() as AddressInfo).port;
  peer.stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return peer;
}
