/**
 * A request with the path sent as written (fetch and URL would resolve `..` and `%2e%2e`), its body with a
 * Content-Length, the answer read whole: for the farm's upload routes, which a node calls with raw bodies.
 */
import { request as httpRequest } from 'node:http';

export interface RawAnswer { status: number; type: string; text: string; json: Record<string, unknown>; body: unknown }

export function rawRequest(base: string, method: string, p: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method, path: p, headers: body === undefined ? headers : { ...headers, 'Content-Length': String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, type: (res.headers['content-type'] ?? '').split(';')[0]!, text, json, body: json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
