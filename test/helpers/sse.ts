/**
 * A server-sent-events client for tests, over node:http: it parses the
 * text/event-stream format as a browser's EventSource does (id, event, data
 * fields; comment lines counted) and keeps every message, so a test waits on
 * a condition over what arrived.
 */
import http from 'node:http';
import { waitFor } from './wait.js';

export interface SseMessage {
  id: string | undefined;
  event: string;
  /** `data` parsed as JSON. */
  data: Record<string, unknown>;
}

export class SseClient {
  readonly messages: SseMessage[] = [];
  comments = 0;
  ended = false;
  private buf = '';

  private constructor(
    private readonly req: http.ClientRequest,
    readonly res: http.IncomingMessage,
  ) {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => this.feed(chunk));
    res.on('end', () => (this.ended = true));
    res.on('close', () => (this.ended = true));
  }

  /** GET `url`; resolves with the response once its headers arrived (any status: check `res.statusCode`). */
  static open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => resolve(new SseClient(req, res)));
      req.on('error', reject);
    });
  }

  /** The body as text, for a non-stream answer (an error). */
  async text(): Promise<string> {
    await waitFor(() => this.ended, 'the answer to end');
    return this.buf;
  }

  /** The messages of some types, in arrival order. */
  of(...types: string[]): SseMessage[] {
    return this.messages.filter((m) => types.includes(m.event));
  }

  /** Wait until a message satisfies `pred`; returns it. */
  next(pred: (m: SseMessage) => boolean, what: string): Promise<SseMessage> {
    return waitFor(() => this.messages.find(pred), { what, timeoutMs: 60_000, maxIntervalMs: 50 });
  }

  close(): void {
    this.req.destroy();
  }

  private feed(chunk: string): void {
    this.buf += chunk;
    if (this.res.statusCode !== 200) return;
    let end: number;
    while ((end = this.buf.indexOf('\n\n')) >= 0) {
      const block = this.buf.slice(0, end);
      this.buf = this.buf.slice(end + 2);
      let id: string | undefined;
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          this.comments++;
          continue;
        }
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'id') id = value;
        else if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length) this.messages.push({ id, event, data: JSON.parse(data.join('\n')) as Record<string, unknown> });
    }
  }
}
