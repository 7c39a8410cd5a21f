/**
 * The node's side of forwarded requests (src/farm/link/h2Server.ts) and its connections to the node's own server
 * on loopback (docs/farm.md, "The node's loopback connections"): a real WebSocket carries the HTTP/2 session, a
 * real HTTP server stands for the node's, and each of its connections is counted.
 */
import { expect } from 'chai';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { WsTunnel } from '../../src/farm/h2Tunnel.js';
import { serveH2 } from '../../src/farm/link/h2Server.js';

interface Seen {
  method: string;
  socket: Socket;
}

describe('node link: forwarded requests on loopback connections', function () {
  this.timeout(30_000);
  let local: http.Server;
  let wss: WebSocketServer;
  let agent: http.Agent;
  let client: http2.ClientHttp2Session;
  let closeServer: () => void;
  const sockets: WebSocket[] = [];
  const seen: Seen[] = [];
  /** The local server closes a reused socket, unanswered, for the next request that arrives on one (set by a test). */
  let dropNextReused = false;

  before(async () => {
    const fresh = new WeakSet<Socket>();
    local = http.createServer((req, res) => {
      const socket = req.socket;
      seen.push({ method: req.method ?? '', socket });
      if (dropNextReused && !fresh.has(socket)) {
        dropNextReused = false;
        socket.destroy(); // as a server closing an idle kept-alive socket just as a request is sent on it
        return;
      }
      fresh.delete(socket);
      req.resume();
      req.on('end', () => res.end(`${req.method} answered`));
    });
    local.on('connection', (s) => fresh.add(s));
    await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
    const localUrl = new URL(`http://127.0.0.1:${(local.address() as AddressInfo).port}`);
    wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise<void>((r) => wss.once('listening', r));
    // The node's side: the HTTP/2 server on the WebSocket's binary frames, requests made to the local server.
    agent = new http.Agent({ keepAlive: true });
    const nodeWs = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
    const portalWs = await new Promise<WebSocket>((r) => wss.once('connection', r));
    sockets.push(nodeWs, portalWs);
    await new Promise<void>((r) => (nodeWs.readyState === WebSocket.OPEN ? r() : nodeWs.once('open', () => r())));
    const nodeTunnel = new WsTunnel(nodeWs);
    nodeTunnel.on('error', () => undefined); // the sessions' last frames after the sockets close, in after()
    nodeWs.on('message', (d: Buffer, binary: boolean) => binary && nodeTunnel.deliver(d));
    const served = serveH2(nodeTunnel, { local: localUrl, delegateSecret: 'x', agent, answered: () => undefined });
    closeServer = () => served.close();
    // The portal's side: an HTTP/2 client session on the other end.
    const tunnel = new WsTunnel(portalWs);
    tunnel.on('error', () => undefined);
    portalWs.on('message', (d: Buffer, binary: boolean) => binary && tunnel.deliver(d));
    client = http2.connect('http://node', { createConnection: () => tunnel });
    client.on('error', () => undefined);
  });
  after(() => {
    client?.close();
    closeServer?.();
    agent?.destroy();
    for (const w of sockets) w.terminate();
    wss?.close();
    local?.close();
  });

  async function forward(method: string): Promise<{ status: number; body: string }> {
    const s = client.request({ ':method': method, ':path': '/x' }, { endStream: method === 'GET' });
    if (method !== 'GET') s.end('{}');
    const status = await new Promise<number>((r) => s.once('response', (h) => r(Number(h[':status']))));
    let body = '';
    for await (const c of s) body += String(c);
    return { status, body };
  }

  it('reads share a kept-alive connection; anything else goes on a connection of its own', async () => {
    seen.length = 0;
    for (const m of ['GET', 'GET', 'POST', 'POST', 'PUT']) expect(await forward(m)).to.deep.equal({ status: 200, body: `${m} answered` });
    const reads = seen.filter((x) => x.method === 'GET').map((x) => x.socket);
    const writes = seen.filter((x) => x.method !== 'GET').map((x) => x.socket);
    expect(reads[0], 'the second read reuses the first one`s connection').to.equal(reads[1]);
    expect(new Set([...writes, reads[0]]).size, 'each write on a new connection').to.equal(writes.length + 1);
  });

  it('a read sent on a kept-alive socket the server closes unanswered is sent once more, on a new connection: 200, not 502', async () => {
    await forward('GET'); // a kept-alive socket in the agent's pool
    seen.length = 0;
    dropNextReused = true;
    expect(await forward('GET')).to.deep.equal({ status: 200, body: 'GET answered' });
    expect(seen.map((x) => x.method)).to.deep.equal(['GET', 'GET']);
    expect(seen[0]!.socket).to.not.equal(seen[1]!.socket);
    expect(dropNextReused, 'the server dropped the first try').to.equal(false);
  });
});
