/**
 * A slow client cannot hold a connection forever: send a request's headers
 * one byte per second and time how long the daemon lets the connection live
 * (server.headersTimeout is 30 s; Node checks it every 30 s, so the cut comes
 * between 30 and 60 s). Exits 1 if the connection is still open after 75 s.
 *
 *   node --import tsx bench/soak/slow-client.ts
 */
import net from 'node:net';
import { startTestDaemon } from '../../test/helpers/daemon.js';

const d = await startTestDaemon({ config: { capture: { uri: 'none:' } } });
const { hostname, port } = new URL(d.url);
const line = Buffer.from('GET /api/v1/results HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(200) + '\r\n\r\n');
const t0 = Date.now();
const result = await new Promise<{ secs: number; answer: string; sent: number }>((resolve) => {
  const sock = net.connect(Number(port), hostname);
  let answer = '';
  let i = 0;
  const timer = setInterval(() => {
    if (i < line.length && !sock.destroyed) sock.write(line.subarray(i, ++i));
  }, 1000);
  const done = () => {
    clearInterval(timer);
    clearTimeout(giveUp);
    resolve({ secs: (Date.now() - t0) / 1000, answer: answer.split('\r\n')[0] ?? '', sent: i });
  };
  const giveUp = setTimeout(() => {
    sock.destroy();
    answer = 'STILL OPEN';
    done();
  }, 75_000);
  sock.on('data', (b) => (answer += b.toString()));
  sock.on('close', done);
  sock.on('error', () => undefined);
});
console.log(`slow client (1 header byte/s): cut off after ${result.secs.toFixed(1)} s, ${result.sent} bytes sent; answer: ${result.answer || '(connection closed)'}`);
await d.stop();
process.exitCode = result.answer === 'STILL OPEN' ? 1 : 0;
