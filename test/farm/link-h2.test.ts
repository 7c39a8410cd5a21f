/**
 * Forwarded requests as HTTP/2 streams over the node's link (src/farm/h2Tunnel.ts; protocol 3): a real portal and a
 * real node. Requests pass as HTTP/2 streams, and a client that stops reading leaves at most the stream's window on
 * the portal while the node's live view goes on making frames (with the link's former multiplexer, protocol 2, what
 * the node sent piled up on the portal until max_buffered_response_bytes); dropping it ends the request.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { H2_LIMITS } from '../../src/farm/hub/h2Client.js';

const NODE = 'h2-node';
/** The streams' initial window (h2Client.ts). */
const WINDOW = H2_LIMITS.streamWindowBytes;

describe('farm link: forwarded requests are HTTP/2 streams over the WebSocket', function () {
  this.timeout(120_000);
  let cluster: TestPostgres;
  let t: TestPortal;
  let d: TestDaemon | undefined;
  let dir: string;
  let token: string;

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    t = await startTestPortal(cluster, { heartbeat_secs: 1 });
    token = t.tokenFor('carol');
    dir = await mkdtemp(path.join(os.tmpdir(), 'farm-h2-'));
    await writeFile(path.join(dir, 'credential'), `${await t.registerNode(NODE)}\n`);
    d = await startTestDaemon({ config: { node_id: NODE, portal: { url: t.portal.url, node_credential_file: path.join(dir, 'credential') } } });
    await waitFor(() => t.portal.hub.link(NODE)?.online, { what: 'the node connected to the portal', timeoutMs: 30_000 });
  });
  after(async () => {
    await d?.stop();
    await t?.stop();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const frameSeq = async (): Promise<number> => {
    const r = await fetch(`${t.portal.url}/app/nodes/${NODE}/live/frame.png`, { headers: { Authorization: `token ${token}` } });
    await r.arrayBuffer();
    return Number(r.headers.get('x-frame-seq'));
  };

  it('forwards requests as HTTP/2 streams', async () => {
    const png = await fetch(`${t.portal.url}/api/v2/nodes/${NODE}/screenshot.png`, { headers: { Authorization: `token ${token}` } });
    expect(png.status).to.equal(200);
    expect(Buffer.from(await png.arrayBuffer()).subarray(1, 4).toString()).to.equal('PNG');
    const run = await fetch(`${t.portal.url}/api/v2/nodes/${NODE}/press`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ key: 'KEY_NOPE' }),
    });
    // The node's own answer to a body it read through the stream (no remote configured: a 4xx JSON error).
    expect(run.status).to.be.within(400, 499);
    expect(((await run.json()) as { error: string }).error).to.be.a('string');
    const conn = (t.portal.hub as unknown as { nodes: { get(id: string): { conn?: { h2?: unknown } } } }).nodes.get(NODE);
    expect(conn.conn?.h2, 'the connection carries HTTP/2').to.not.equal(undefined);
  });

  it('holds at most a window of a stream nobody reads, while the node goes on making frames; dropping it ends it', async () => {
    const res = await t.portal.hub.forward(NODE, { method: 'GET', path: '/app/live/stream.mjpeg', headers: {}, user: 'carol', baseUrl: t.portal.url });
    res.body.on('error', () => undefined);
    expect(res.status).to.equal(200);
    res.body.pause();
    // The window fills, then the node's view makes 50 more frames (about 100 KiB of JPEG each second at 25 a second).
    await waitFor(() => res.body.readableLength > WINDOW / 2, 'the stream window to fill');
    const seq = await frameSeq();
    await waitFor(async () => (await frameSeq()) >= seq + 50, 'the node to make 50 more frames');
    expect(res.body.readableLength).to.be.at.most(WINDOW + 64 * 1024);
    res.body.destroy();
    await waitFor(() => t.portal.hub.forwardsInFlight() === 0, 'the forward to end');
  });
});
