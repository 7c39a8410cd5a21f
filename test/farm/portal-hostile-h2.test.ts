/**
 * A hostile node against the portal's HTTP/2 client (src/farm/hub/h2Client.ts; docs/farm.md, "What a node can do to
 * the portal"): forwarded requests are streams of an HTTP/2 session in the node's link, and the node is its server, so
 * it writes what it likes on it. A real portal (PostgreSQL) and the farm's protocol stand-in (test/helpers/farmNodes.ts)
 * as the node, with Node's own HTTP/2 server or with frames of its own making. What each test proves: a huge header
 * block, endless requests held open, an answer past its stream's window and bytes that are not HTTP/2 each cost the
 * portal a bounded amount and fail only that node's requests (503), never the portal.
 */
import { expect } from 'chai';
import { isFarmError } from '../../src/core/errors.js';
import { CLOSE_PROTOCOL } from '../../src/farm/hub/index.js';
import { H2_LIMITS } from '../../src/farm/hub/h2Client.js';
import type { ForwardResponse } from '../../src/farm/contract.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { SimNode, type SimNodeOptions } from '../helpers/farmNodes.js';
import { waitFor } from '../helpers/wait.js';

const WAIT = { timeoutMs: 30_000 };

/** An HTTP/2 frame: 3 bytes length, type, flags, 4 bytes stream id, payload (RFC 9113, 4.1). */
const frame = (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
};
/** The frames in `buf` (whole ones; the client preface skipped). */
const frames = (buf: Buffer): { type: number; stream: number }[] => {
  const out: { type: number; stream: number }[] = [];
  const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
  for (let at = buf.subarray(0, 24).toString('latin1') === preface ? 24 : 0; at + 9 <= buf.length; at += 9 + buf.readUIntBE(at, 3)) {
    out.push({ type: buf.readUInt8(at + 3), stream: buf.readUInt32BE(at + 5) & 0x7fffffff });
  }
  return out;
};
const SETTINGS = 0x4;
const HEADERS = 0x1;
const DATA = 0x0;
const END_HEADERS = 0x4;
const ACK = 0x1;

describe('farm portal: a hostile node on the HTTP/2 of its link', function () {
  this.timeout(120_000);
  let cluster: TestPostgres;
  let t: TestPortal;
  const nodes: SimNode[] = [];

  const online = async (nodeId: string, o: Partial<SimNodeOptions> = {}) => {
    const n = new SimNode({ portalUrl: t.portal.url, nodeId, credential: await t.registerNode(nodeId), ...o });
    nodes.push(n);
    await n.connect();
    await waitFor(() => n.welcome, { what: `${nodeId}'s welcome`, ...WAIT });
    n.startHeartbeats();
    return n;
  };
  const fwd = (nodeId: string, path: string): Promise<ForwardResponse> =>
    t.portal.hub.forward(nodeId, { method: 'GET', path, headers: {}, user: 'u', baseUrl: 'http://p' });
  const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as Error);

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    t = await startTestPortal(cluster, { heartbeat_secs: 1 });
  });
  after(async () => {
    for (const n of nodes) n.kill();
    await t?.stop();
    await cluster?.stop();
  });

  it('an answer with a header block past the limit fails that request (503); the link and its next request are fine', async () => {
    const n = await online('h2-headers', {
      onRequest: (req, reply) => {
        if (req.head.path === '/huge') reply.head(200, { 'x-huge': 'a'.repeat(H2_LIMITS.maxHeaderListBytes + 1024) });
        else reply.head(204);
        reply.end();
      },
    });
    const e = await failure(fwd('h2-headers', '/huge'));
    expect(isFarmError(e) && e.code, String(e)).to.equal('device_unavailable');
    expect((await fwd('h2-headers', '/fine')).status).to.equal(204);
    expect(n.closed).to.equal(undefined);
  });

  it('requests a node holds open are bounded: past the most a node may have in flight, the next is a 503 at once', async () => {
    const n = await online('h2-holds', { onRequest: () => undefined }); // never answers
    const held: Promise<unknown>[] = [];
    const acs = Array.from({ length: H2_LIMITS.maxStreams }, () => new AbortController());
    acs.forEach((ac, i) => held.push(t.portal.hub.forward('h2-holds', { method: 'GET', path: `/hold/${i}`, headers: {}, user: 'u', baseUrl: 'http://p' }, ac.signal).catch(() => undefined)));
    await waitFor(() => t.portal.hub.forwardsInFlight() >= H2_LIMITS.maxStreams, { what: 'the requests in flight', ...WAIT });
    const e = await failure(fwd('h2-holds', '/one-more'));
    expect(isFarmError(e) && e.code).to.equal('device_unavailable');
    expect((e as Error).message).to.match(/requests in flight, its most/);
    for (const ac of acs) ac.abort();
    await Promise.all(held);
    await waitFor(() => t.portal.hub.forwardsInFlight() === 0, { what: 'the held requests to end', ...WAIT });
    // Each reset reached the node (its requests end there too); the node can be asked again.
    await waitFor(() => n.cancelled.size === H2_LIMITS.maxStreams, { what: 'every held stream reset at the node', ...WAIT });
  });

  it('an answer past its stream window is cut, the portal holding at most the window', async () => {
    const n = await online('h2-flood', { rawH2: true });
    n.raw(frame(SETTINGS, 0, 0));
    await waitFor(() => n.rawIn.length > 0, { what: "the portal's preface", ...WAIT });
    n.raw(frame(SETTINGS, ACK, 0));
    const answer = fwd('h2-flood', '/flood');
    // The portal's first request is stream 1: answered 200 (HPACK static index 8) then 1 MiB, 4 times the window.
    await waitFor(() => frames(Buffer.concat(n.rawIn)).some((f) => f.type === HEADERS && f.stream === 1), { what: "the portal's request", ...WAIT });
    n.raw(frame(HEADERS, END_HEADERS, 1, Buffer.from([0x88])));
    const res = await answer;
    expect(res.status).to.equal(200);
    res.body.pause();
    const broke = new Promise<Error | undefined>((resolve) => {
      res.body.once('error', resolve);
      res.body.once('close', () => resolve(undefined));
    });
    for (let i = 0; i < 64; i++) n.raw(frame(DATA, 0, 1, Buffer.alloc(16 * 1024, 1)));
    await broke;
    // The window, and the one frame of it Node had already handed on (and acknowledged) before the pause took hold.
    expect(res.body.readableLength).to.be.at.most(H2_LIMITS.streamWindowBytes + 16 * 1024);
    expect(res.body.destroyed).to.equal(true);
  });

  it('bytes that are not HTTP/2 close the node`s link (its requests fail with 503)', async () => {
    const n = await online('h2-garbage', { onRequest: () => undefined });
    const waiting = failure(fwd('h2-garbage', '/held'));
    await waitFor(() => n.requests.length > 0, WAIT);
    n.raw(frame(DATA, 0, 0, Buffer.from('not on stream 0'))); // DATA on stream 0: a connection error (RFC 9113, 6.1)
    const e = await waiting;
    expect(isFarmError(e) && e.code, String(e)).to.equal('device_unavailable');
    await waitFor(() => n.closed, { what: 'the link closed', ...WAIT });
    expect(n.closed).to.deep.equal({ code: CLOSE_PROTOCOL, reason: 'HTTP/2 session broken' });
    await waitFor(() => t.portal.hub.link('h2-garbage')?.online === false, WAIT);
  });
});
