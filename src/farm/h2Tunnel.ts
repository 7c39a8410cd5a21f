/**
 * A prototype behind a flag (docs/farm.md, "The node's connection": HTTP/2 over the link): the forwarded requests
 * of a node's connection carried by HTTP/2 instead of the link's own multiplexer, for HTTP/2's per-request flow
 * control and cancellation (RST_STREAM). The HTTP/2 bytes travel inside the existing WebSocket as binary frames of
 * channel 0 (a forwarded request's id is never 0), beside the JSON messages; this Duplex is one end of that byte
 * stream. The portal is the HTTP/2 client (src/farm/hub/h2Client.ts), the node the server
 * (src/farm/link/h2Server.ts). Used only when both processes run with FARMHAND_LINK_H2=1 (the node offers it in its
 * hello, the portal accepts in its welcome); otherwise nothing changes.
 */
import { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import { encodeChunk } from './protocol.js';

export const H2_CHANNEL = 0;

/** The flag: both sides must have it. */
export const linkH2Enabled = (): boolean => process.env.FARMHAND_LINK_H2 === '1';

/** A binary frame of the HTTP/2 channel (and not a forwarded request's body or answer). */
export const isTunnelFrame = (frame: Buffer): boolean => frame.length >= 4 && frame.readUInt32BE(0) === H2_CHANNEL;

/** One end of the HTTP/2 byte stream in a WebSocket. Writes complete when the socket has taken them (backpressure). */
export class WsTunnel extends Duplex {
  constructor(private readonly ws: WebSocket) {
    super();
  }

  /** A frame of the channel arrived: its bytes (after the 4-byte channel id) are read by the HTTP/2 session. */
  deliver(frame: Buffer): void {
    if (!this.destroyed) this.push(frame.subarray(4));
  }

  override _read(): void {
    // Bytes are pushed as frames arrive; HTTP/2's windows bound what the peer may send.
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    if (this.ws.readyState !== this.ws.OPEN) {
      cb(new Error('the link closed'));
      return;
    }
    this.ws.send(encodeChunk(H2_CHANNEL, chunk), (e) => cb(e ?? null));
  }

  override _writev(chunks: { chunk: Buffer }[], cb: (e?: Error | null) => void): void {
    this._write(Buffer.concat(chunks.map((c) => c.chunk)), 'binary', cb);
  }

  override _final(cb: (e?: Error | null) => void): void {
    cb();
  }
}
