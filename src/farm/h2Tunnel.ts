/**
 * The byte stream of a node's link (docs/farm.md, "Forwarded requests: HTTP/2 over the WebSocket"): the binary frames
 * of the WebSocket carry, in order, the bytes of one HTTP/2 connection whose client is the portal
 * (src/farm/hub/h2Client.ts) and whose server is the node (src/farm/link/h2Server.ts); the text frames beside them are
 * the JSON messages of protocol.ts. This Duplex is one end of that byte stream, on either side.
 */
import { Duplex } from 'node:stream';
import type WebSocket from 'ws';

/** The most bytes of the HTTP/2 connection in one WebSocket message. */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

/** One end of the HTTP/2 byte stream in a WebSocket. Writes complete when the socket has taken them (backpressure). */
export class WsTunnel extends Duplex {
  private onGoaway: (() => void) | undefined;
  /** Of the bytes written: those left to pass over (the client preface, a frame's payload), and a frame header begun. */
  private skip = 0;
  private head = Buffer.alloc(0);

  constructor(private readonly ws: WebSocket) {
    super();
  }

  /**
   * Called when this side's HTTP/2 session writes a GOAWAY (the client side's: its bytes start with the preface).
   * Node's session sends one when the peer breaks the protocol but then neither ends nor says so: its requests would
   * wait for ever. The frames written are followed by their 9-byte headers (RFC 9113, 4.1) to see it.
   */
  watchGoaway(cb: () => void): void {
    this.onGoaway = cb;
    this.skip = 24;
  }

  private watch(chunk: Buffer): void {
    for (let at = 0; at < chunk.length && this.onGoaway; ) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - at);
        this.skip -= n;
        at += n;
        continue;
      }
      const take = chunk.subarray(at, at + 9 - this.head.length);
      this.head = Buffer.concat([this.head, take]);
      at += take.length;
      if (this.head.length < 9) return;
      this.skip = this.head.readUIntBE(0, 3);
      const goaway = this.head[3] === 0x7;
      this.head = Buffer.alloc(0);
      if (goaway) this.onGoaway();
    }
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
    if (this.onGoaway) this.watch(chunk);
    // In frames of at most MAX_MESSAGE_BYTES (the portal takes a node's frames up to 16 MiB): the last one's send ends the write.
    for (let at = 0; at < chunk.length; at += MAX_MESSAGE_BYTES) {
      const last = at + MAX_MESSAGE_BYTES >= chunk.length;
      this.ws.send(chunk.subarray(at, at + MAX_MESSAGE_BYTES), { binary: true }, last ? (e) => cb(e ?? null) : undefined);
    }
    if (chunk.length === 0) cb();
  }

  override _writev(chunks: { chunk: Buffer }[], cb: (e?: Error | null) => void): void {
    this._write(Buffer.concat(chunks.map((c) => c.chunk)), 'binary', cb);
  }

  override _final(cb: (e?: Error | null) => void): void {
    cb();
  }
}
