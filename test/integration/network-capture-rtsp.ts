/**
 * A minimal RTSP server for the network capture tests: ffmpeg can only be an RTSP client (or a
 * receiver in listen mode), and the RTSP servers Debian 12 packages are a library (GStreamer's, driven
 * through GObject introspection) and a Perl daemon (rtsp-server-perl), more to install and run than
 * this, and neither lets a test drop its clients as a rebooting encoder does. So the encoder
 * is an ffmpeg sending RTP (H.264, `-f rtp`, its SDP written to a file) to a UDP port of this server,
 * which answers OPTIONS, DESCRIBE (that SDP), SETUP (interleaved over the RTSP connection only:
 * `RTP/AVP/TCP;interleaved=0-1`), PLAY, GET_PARAMETER and TEARDOWN, and relays every RTP packet to
 * the playing clients as `$` frames (RFC 2326 section 10.12). `restart()` is an encoder rebooting:
 * the clients' connections close and the next DESCRIBE gets the new sender's SDP.
 */
import { spawn } from 'node:child_process';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { rmSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SENDER_GOP, type Sender } from './network-capture-lib.js';

export class MiniRtspServer {
  private readonly tcp: Server;
  private readonly udp: UdpSocket;
  private readonly players = new Set<Socket>();
  private readonly clients = new Set<Socket>();
  private sdp: string | undefined;
  rtspPort = 0;
  rtpPort = 0;

  constructor(private readonly sdpFile = join(tmpdir(), `farmhand-rtsp-${process.pid}-${Date.now()}.sdp`)) {
    this.tcp = createServer((s) => this.onClient(s));
    this.udp = createSocket('udp4');
    this.udp.on('message', (pkt) => this.relay(pkt));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.udp.bind(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => this.tcp.listen(0, '127.0.0.1', resolve));
    this.rtpPort = this.udp.address().port;
    this.rtspPort = (this.tcp.address() as { port: number }).port;
  }

  /** The capture.uri a node reads this server with. */
  uri(credentials = ''): string {
    return `rtsp://${credentials}127.0.0.1:${this.rtspPort}/live`;
  }

  /** Start an encoder stand-in sending width x height to this server (the previous one must be killed). */
  startSender(width: number, height: number, color: string): Sender {
    this.sdp = undefined;
    rmSync(this.sdpFile, { force: true }); // the last sender's SDP must not be served for this one's stream
    const proc = spawn('ffmpeg', [
      '-hide_banner', '-nostdin', '-loglevel', 'error', '-y',
      '-re', '-f', 'lavfi', '-i', `color=c=${color}:size=${width}x${height}:rate=25`,
      '-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-pix_fmt', 'yuv420p', '-g', String(SENDER_GOP),
      '-f', 'rtp', '-sdp_file', this.sdpFile, `rtp://127.0.0.1:${this.rtpPort}?pkt_size=1200`,
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    proc.stderr.setEncoding('utf8').on('data', (s: string) => (err = (err + s).slice(-2000)));
    const exited = new Promise<void>((resolve) => proc.once('close', () => resolve()));
    return {
      proc,
      exited,
      stderr: () => err,
      kill: async () => {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
        await exited;
      },
    };
  }

  /** An encoder rebooting: every client connection closes; the next DESCRIBE gets the next sender's SDP. */
  restart(): void {
    this.sdp = undefined;
    for (const s of this.clients) s.destroy();
  }

  async close(): Promise<void> {
    this.restart();
    await new Promise<void>((resolve) => this.tcp.close(() => resolve()));
    await new Promise<void>((resolve) => this.udp.close(() => resolve()));
    await rm(this.sdpFile, { force: true });
  }

  private relay(pkt: Buffer): void {
    const head = Buffer.from([0x24, 0, pkt.length >> 8, pkt.length & 0xff]);
    for (const s of this.players) s.write(Buffer.concat([head, pkt]));
  }

  private onClient(s: Socket): void {
    this.clients.add(s);
    s.on('close', () => {
      this.clients.delete(s);
      this.players.delete(s);
    });
    s.on('error', () => undefined);
    let buf = '';
    s.setEncoding('latin1').on('data', (d: string) => {
      buf += d;
      for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
        const request = buf.slice(0, end);
        buf = buf.slice(end + 4);
        void this.answer(s, request);
      }
    });
  }

  private async answer(s: Socket, request: string): Promise<void> {
    const [line = '', ...headers] = request.split('\r\n');
    const method = line.split(' ')[0];
    const cseq = headers.find((h) => /^cseq:/i.test(h))?.split(':')[1]?.trim() ?? '0';
    const reply = (status: string, extra: string[] = [], body = '') => {
      const head = [`RTSP/1.0 ${status}`, `CSeq: ${cseq}`, ...extra, ...(body ? [`Content-Length: ${Buffer.byteLength(body)}`] : [])];
      s.write(`${head.join('\r\n')}\r\n\r\n${body}`);
    };
    switch (method) {
      case 'OPTIONS':
        return reply('200 OK', ['Public: OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, TEARDOWN']);
      case 'DESCRIBE': {
        this.sdp ??= await readFile(this.sdpFile, 'utf8').catch(() => undefined);
        if (this.sdp === undefined || !this.sdp.includes('m=video')) return reply('503 Service Unavailable');
        return reply('200 OK', ['Content-Type: application/sdp', `Content-Base: ${line.split(' ')[1]}/`], this.sdp);
      }
      case 'SETUP':
        return reply('200 OK', ['Transport: RTP/AVP/TCP;unicast;interleaved=0-1', 'Session: 1;timeout=60']);
      case 'PLAY':
        this.players.add(s);
        return reply('200 OK', ['Session: 1']);
      case 'TEARDOWN':
        reply('200 OK', ['Session: 1']);
        s.end();
        return;
      default:
        return reply('200 OK', ['Session: 1']); // GET_PARAMETER (keep-alive) and anything else
    }
  }
}
