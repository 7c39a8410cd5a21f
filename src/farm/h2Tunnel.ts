/**
 * The byte stream of a node's link (docs/farm.md, "Forwarded requests: HTTP/2 over the WebSocket"): the binary frames
 * of the WebSocket carry, in order, the bytes of one HTTP/2 connection whose client is the portal
 * (src/farm/hub/h2Client.ts) and whose server is the node (src/farm/link/h2Server.ts); the text frames beside them are
 * the JSON messages of protocol.ts. This Duplex is one end of that byte stream, on either side.
 */
import { Duplex } from 'node:stream';
import type WebSocket from 'ws';

/** One end of the HTTP/2 byte stream in a WebSocket. Writes complete when the socket has taken them (backpressure). */
export class WsTunnel extends Duplex {
  constructor(private readonly ws: WebSocket) {
    super();
  }

  /** A binary frame arrived: its bytes are read by the HTTP/2 session. */
  deliver(frame: Buffer): void {
    if (!this.destroyed) this.push(frame);
  }

  override _read(): void {
    // Bytes are pushed as frames arrive; HTTP/2's windows bound what the peer may send.
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    if (this.ws.readyState !== this.ws.OPEN) {
      cb(new Error('the link closed'));
      return;
    }
    this.ws.send(chunk, { binary: true }, (e) => cb(e ?? null));
  }

  override _writev(chunks: { chunk: Buffer }[], cb: (e?: Error | null) => void): void {
    this._write(Buffer.concat(chunks.map((c) => c.chunk)), 'binary', cb);
  }

  override _final(cb: (e?: Error | null) => void): void {
    cb();
  }
}
