/**
 * docs/farm.md's HAProxy configuration ("HAProxy in front of the portal"), held to what it says with a
 * real Debian `haproxy`: every HAProxy block of the document passes `haproxy -c` (after Debian's own
 * haproxy.cfg, as the document says to put them); and its `defaults farm` and `backend portal`, taken
 * from the document word for word but for the server's address, in front of a real portal with a real
 * node connected THROUGH HAProxy (its WebSocket): HAProxy finds the portal up by `/readyz`, marks it
 * down while PostgreSQL is stopped (its own 503 to a new request), keeps the node's established
 * connection meanwhile (no `shutdown-sessions`), and up again once PostgreSQL is back.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm, throughReplicas } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

const DOC = fileURLToPath(new URL('../../docs/farm.md', import.meta.url));
const NODE = 'farmhand-hap';
const WAIT = { timeoutMs: 60_000, maxIntervalMs: 250 };

/** The document's HAProxy blocks: fenced blocks whose first line opens an HAProxy section, unindented. */
function haproxyBlocks(): string[] {
  const doc = readFileSync(DOC, 'utf8');
  const out: string[] = [];
  for (const m of doc.matchAll(/^( *)```\n((?:\1)(?:defaults|listen|frontend|backend|global)\b[\s\S]*?)^\1```$/gm)) {
    const indent = m[1]!;
    out.push(m[2]!.split('\n').map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l)).join('\n'));
  }
  return out;
}

/** One section (`backend portal`, `defaults farm`) of the blocks, up to the next section. */
function section(blocks: string[], head: string): string {
  const all = blocks.join('\n');
  const m = new RegExp(`^${head}\\n(?:[ \\t].*\\n|\\n)*`, 'm').exec(all);
  if (!m) throw new Error(`docs/farm.md has no "${head}" HAProxy section`);
  return m[0];
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** One command on HAProxy's stats socket; resolves with its answer. */
function statsCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(socket);
    let out = '';
    c.on('data', (b: Buffer) => (out += b.toString('utf8')));
    c.on('end', () => resolve(out));
    c.on('error', reject);
    c.end(`${command}\n`);
  });
}

describe('farm: docs/farm.md`s HAProxy in front of the portal (a real haproxy)', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): puts its own HAProxy in front of the one portal, and stops PostgreSQL past a replica's lease.
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(240_000);
  let work: string;
  let farm: TestFarm | undefined;
  let node: TestDaemon | undefined;
  let haproxy: ChildProcess | undefined;
  let haproxyLog = '';

  before(async () => {
    const v = spawnSync('haproxy', ['-v']);
    if (v.error) throw new Error('haproxy is not installed: scripts/setup.sh installs it (apt-get install haproxy)');
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-haproxy-'));
  });
  after(async () => {
    haproxy?.kill('SIGKILL');
    await node?.stop();
    await farm?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('every HAProxy block of the document is a valid configuration (haproxy -c, after Debian`s haproxy.cfg)', async () => {
    const blocks = haproxyBlocks();
    const heads = blocks.flatMap((b) => b.split('\n').filter((l) => /^(defaults|frontend|backend|listen)\b/.test(l)));
    expect(heads).to.deep.equal(['defaults farm', 'frontend farm', 'backend portal', 'listen farm-postgres']);
    // A throwaway certificate where the document names /etc/haproxy/farm.pem.
    const pem = path.join(work, 'farm.pem');
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=farm.example.com', '-keyout', pem, '-out', `${pem}.crt`, '-days', '1']);
    expect(made.status, made.stderr.toString()).to.equal(0);
    await writeFile(pem, readFileSync(`${pem}.crt`, 'utf8') + readFileSync(pem, 'utf8'));
    const debian = readFileSync('/etc/haproxy/haproxy.cfg', 'utf8');
    const cfg = path.join(work, 'check.cfg');
    await writeFile(cfg, `${debian}\n${blocks.join('\n').replaceAll('/etc/haproxy/farm.pem', pem)}`);
    const c = spawnSync('haproxy', ['-c', '-f', cfg]);
    const out = c.stdout.toString() + c.stderr.toString();
    expect(c.status, out).to.equal(0);
    expect(out, 'no warnings').not.to.match(/WARNING|ALERT/);
  });

  it('HAProxy checks /readyz: the portal up, down while PostgreSQL is stopped (the node`s connection kept), up again', async () => {
    farm = await startTestFarm({ portal: { heartbeat_secs: 2 } });
    const blocks = haproxyBlocks();
    const portalAddr = new URL(farm.url).host;
    const port = await freePort();
    const socket = path.join(work, 'haproxy.sock');
    const backend = section(blocks, 'backend portal')
      .split('\n')
      // The document's servers are hosts of a real farm; here the one portal of the test.
      .filter((l) => !/^\s*server /.test(l))
      .join('\n');
    const cfg = path.join(work, 'run.cfg');
    await writeFile(
      cfg,
      [
        'global',
        `    stats socket ${socket} mode 600 level admin`,
        '',
        section(blocks, 'defaults farm'),
        'frontend farm',
        `    bind 127.0.0.1:${port}`,
        '    default_backend portal',
        '',
        backend.trimEnd(),
        `    server portal-1 ${portalAddr} check`,
        '',
      ].join('\n'),
    );
    haproxy = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
    haproxy.stdout!.on('data', (b: Buffer) => (haproxyLog += b.toString()));
    haproxy.stderr!.on('data', (b: Buffer) => (haproxyLog += b.toString()));
    const front = `http://127.0.0.1:${port}`;
    /** HAProxy's operational state of the portal: 2 running, 0 stopped (`show servers state`). */
    const state = async (): Promise<number | undefined> => {
      const text = await statsCommand(socket, 'show servers state portal').catch(() => '');
      const line = text.split('\n').find((l) => l.includes(' portal-1 '));
      return line === undefined ? undefined : Number(line.split(' ')[5]);
    };
    await waitFor(async () => (await state()) === 2, { what: `HAProxy to see the portal up (${haproxyLog})`, ...WAIT });
    const token = await farm.tokenFor('hana');

    // A node joins through HAProxy (its WebSocket goes through the frontend).
    const file = path.join(work, 'node.credential');
    await writeFile(file, `${await registerNode(farm.db, NODE)}\n`, { mode: 0o600 });
    node = await startTestDaemon({ config: { node_id: NODE, portal: { url: front, node_credential_file: file } } });
    await waitFor(() => farm!.portal.hub.link(NODE)?.online, { what: 'the node joined through HAProxy', ...WAIT });
    const list = await fetch(`${front}/api/v2/nodes/${NODE}`, { headers: { Authorization: `token ${token}` } });
    expect(list.status, await list.text()).to.equal(200);
    const connections = node.daemon.portalLink!.connections;

    await farm.cluster.stopServer('fast');
    let stopped = true;
    try {
      await waitFor(async () => (await state()) === 0, { what: 'HAProxy to mark the portal down', ...WAIT });
      const refused = await fetch(`${front}/api/v2/nodes`, { headers: { Authorization: `token ${token}` } });
      expect(refused.status).to.equal(503);
      expect(await refused.text(), "HAProxy's own answer").to.match(/No server is available/);
      // The node's WebSocket, established before, is kept: no reconnection, still online on the portal.
      expect(node.daemon.portalLink!.connected).to.equal(true);
      expect(node.daemon.portalLink!.connections).to.equal(connections);
      await farm.cluster.startServer();
      stopped = false;
      await waitFor(async () => (await state()) === 2, { what: 'HAProxy to see the portal up again', ...WAIT });
      const back = await fetch(`${front}/api/v2/nodes`, { headers: { Authorization: `token ${token}` } });
      expect(back.status, await back.text()).to.equal(200);
      expect(node.daemon.portalLink!.connections, 'the node never reconnected').to.equal(connections);
    } finally {
      if (stopped) await farm.cluster.startServer();
    }
  });
});
