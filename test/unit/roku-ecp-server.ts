/**
 * A Roku External Control Protocol server on loopback, for tests and the
 * bench: real HTTP on an ephemeral port, answering as a Roku does
 * (`POST /keypress|keydown|keyup/<key>`, `POST /launch/<app>`, `GET
 * /query/device-info`) and recording every request. `mode` makes it
 * misbehave: `forbidden` (403, "Control by mobile apps" off), `silent`
 * (takes the request, never answers), `error` (500).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EcpRequest {
  method: string;
  path: string;
}

export type EcpMode = 'ok' | 'forbidden' | 'silent' | 'error';

export interface FakeEcp {
  url: string;
  requests: EcpRequest[];
  mode: EcpMode;
  /** Resolves once `n` requests have arrived. */
  waitFor(n: number): Promise<void>;
  close(): Promise<void>;
}

const DEVICE_INFO = `<?xml version="1.0" encoding="UTF-8" ?>
<device-info>
  <udn>29380000-0800-1025-80a4-d83154332d7e</udn>
  <serial-number>YH00AA123456</serial-number>
  <model-name>Roku Ultra</model-name>
  <model-number>4800X</model-number>
  <friendly-device-name>Lab &amp; bench</friendly-device-name>
  <software-version>12.5.0</software-version>
  <power-mode>PowerOn</power-mode>
</device-info>
`;

export async function startFakeEcp(): Promise<FakeEcp> {
  const requests: EcpRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const held: http.ServerResponse[] = [];
  const fake = { requests, mode: 'ok' } as FakeEcp;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      requests.push({ method: req.method ?? '', path: req.url ?? '' });
      for (const w of waiters.filter((x) => requests.length >= x.n)) w.resolve();
      answer(fake.mode, req, res, held);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.waitFor = (n) => (requests.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })));
  fake.close = async () => {
    for (const r of held) r.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return fake;
}

function answer(mode: EcpMode, req: http.IncomingMessage, res: http.ServerResponse, held: http.ServerResponse[]): void {
  if (mode === 'silent') {
    held.push(res);
    return;
  }
  if (mode === 'forbidden') {
    res.writeHead(403, { 'content-type': 'text/plain' }).end('ECP command not allowed in Limited mode');
    return;
  }
  if (mode === 'error') {
    res.writeHead(500).end();
    return;
  }
  const url = req.url ?? '';
  if (req.method === 'GET' && url === '/query/device-info') {
    res.writeHead(200, { 'content-type': 'text/xml; charset="utf-8"' }).end(DEVICE_INFO);
  } else if (req.method === 'POST' && /^\/(keypress|keydown|keyup)\/[^/]+$/.test(url)) {
    res.writeHead(200).end(); // as a Roku: 200 for any key name
  } else if (req.method === 'POST' && /^\/launch\/(12|dev)(\?|$)/.test(url)) {
    res.writeHead(200).end();
  } else {
    res.writeHead(404).end();
  }
}
