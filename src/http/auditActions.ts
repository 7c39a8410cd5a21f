/**
 * Which request is which audited action (docs/auth.md, "Audit trail"): `METHOD path` as the routers mount it
 * (`:name` is one path segment). The same table serves a node and the portal, which answer the same paths.
 * A request matching none is not recorded: reads change nothing.
 *
 * `remote.press` is not an entry of its own: presses are gathered into manual control sessions
 * (src/http/audit.ts).
 */
import type { AuditAction } from '../core/audit.js';

export type AuditRouteAction = AuditAction | 'remote.press';

export const AUDIT_ROUTES: Readonly<Record<string, AuditRouteAction>> = {
  'POST /api/v1/run_tests': 'job.run',
  'POST /api/v2/run_tests': 'job.run',
  'POST /api/v1/jobs/:node/:hex/:num/stop': 'job.stop',
  'POST /api/v2/jobs/:node/:hex/:num/stop': 'job.stop',
  'PUT /api/v2/jobs/:node/:hex/:num/stop': 'job.stop',
  'POST /api/v2/nodes/:node_id/job/stop': 'job.stop',
  'POST /api/v2/reservations': 'reservation.create',
  'POST /api/v2/reservations/:id/extend': 'reservation.extend',
  'DELETE /api/v2/reservations/:id': 'reservation.end',
  'POST /api/v2/reservations/:id/interrupt': 'reservation.interrupt',
  'POST /api/v2/nodes/:node_id/press': 'remote.press',
  'POST /api/v2/nodes/:node_id/maintenance': 'node.maintenance',
  'POST /github/post-receive': 'testpack.fetch',
};

interface Compiled {
  method: string;
  re: RegExp;
  names: string[];
  action: AuditRouteAction;
}

const COMPILED: Compiled[] = Object.entries(AUDIT_ROUTES).map(([key, action]) => {
  const [method, path] = key.split(' ') as [string, string];
  const names: string[] = [];
  const re = path
    .split('/')
    .map((seg) => {
      if (!seg.startsWith(':')) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(seg.slice(1));
      return '([^/]+)';
    })
    .join('/');
  // The routers match case-insensitively, and trailing slashes are folded before routing.
  return { method, re: new RegExp(`^${re}/*$`, 'i'), names, action };
});

const decode = (v: string): string => {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
};

/** The action of a request and its path parameters; undefined when it is not audited. */
export function auditRouteOf(method: string, path: string): { action: AuditRouteAction; params: Record<string, string> } | undefined {
  for (const c of COMPILED) {
    if (c.method !== method.toUpperCase()) continue;
    const m = c.re.exec(path);
    if (!m) continue;
    const params: Record<string, string> = {};
    c.names.forEach((n, i) => (params[n] = decode(m[i + 1]!)));
    return { action: c.action, params };
  }
  return undefined;
}
