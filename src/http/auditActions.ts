/**
 * Which request is which audited action (docs/auth.md, "Audit trail"): the `audit` field of the table of
 * endpoints (src/http/endpoints/), matched against the request's method and path (`:name` is one path
 * segment). The same table serves a node and the portal, which answer the same paths. A request matching
 * no entry with an `audit` is not recorded: reads change nothing.
 *
 * The path is matched here, before routing, rather than read from the route the router chose: the trail
 * also records a request that the body parser refuses (its outcome a 4xx), and that one never reaches a route.
 *
 * `remote.press` is gathered into manual control sessions (src/http/audit.ts).
 */
import { ENDPOINTS, type AuditRouteAction } from './endpoints/table.js';

export type { AuditRouteAction };

interface Compiled {
  method: string;
  re: RegExp;
  names: string[];
  action: AuditRouteAction;
}

const COMPILED: Compiled[] = ENDPOINTS.flatMap(({ method, path, audit: action }) => {
  if (!action) return [];
  if (path.includes('*')) throw new Error(`table of endpoints: ${method} ${path}: an audited route has only one-segment parameters`);
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
  return [{ method, re: new RegExp(`^${re}/*$`, 'i'), names, action }];
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
