/**
 * Recording the audit trail at the HTTP layer (docs/auth.md, "Audit trail"), on a node and on the portal:
 * a middleware that runs after the handler of every request the table of src/http/auditActions.ts names,
 * and writes one entry with who, from where, what and the status answered (an error thrown by the handler
 * too). Mounted after the rate limiter and before the token guard; a request the guard refuses for want of
 * any credential is not recorded (it did nothing, and anyone could fill the disk with them).
 *
 * Presses are gathered into manual control sessions: the first press of a caller (user, credential, address)
 * on a node writes `remote.session_start`; the session ends when that caller has pressed nothing for
 * `idleMs` (or the server stops: `close()`), writing `remote.session_end` with the count of presses and of
 * refused ones. Key names are never written (a PIN typed with the remote is a secret).
 *
 * And `GET /api/v2/audit` (admin only), the same on both.
 */
import Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { clip, parseAuditQuery, type AuditAction, type AuditLog, type AuditVia, type NewAuditEntry } from '../core/audit.js';
import { FarmError, isFarmError } from '../core/errors.js';
import type { Logger } from '../core/ports.js';
import { permits } from '../core/roles.js';
import { auditRouteOf } from './auditActions.js';
import { clientAddressOf, userOf, viaPortal } from './auth.js';
import { STATUS } from './errors.js';
import { sessionOf } from './session.js';
import { mount } from './endpoints/mount.js';

export const DEFAULT_MANUAL_IDLE_SECS = 300;

export interface AuditTrailOptions {
  log: AuditLog;
  /** A node: its id (every action there is on it). The portal: undefined (the node is in the path or body). */
  nodeId?: string;
  /** A manual control session ends after this long without a press. */
  idleMs?: number;
  now?: () => number;
  logger?: Logger;
}

interface Who {
  who: string;
  via: AuditVia;
  token_id: string | null;
  from: string | null;
}

interface ManualSession extends Who {
  node: string | null;
  started: number;
  last: number;
  presses: number;
  refused: number;
  outcome: number;
  timer: NodeJS.Timeout;
}

export interface AuditTrail {
  middleware: Middleware;
  /** End every open manual control session (writes their `remote.session_end`). */
  close(): void;
  /** Manual control sessions open now. */
  readonly openSessions: number;
}

const whoOf = (ctx: Context): Who => {
  const u = userOf(ctx);
  const via: AuditVia = !u ? 'none' : viaPortal(ctx) ? 'portal' : sessionOf(ctx) ? 'session' : 'token';
  return { who: u?.login ?? 'anonymous', via, token_id: u && via !== 'portal' ? u.tokenId : null, from: clientAddressOf(ctx) };
};

const statusOf = (e: unknown): number => {
  if (isFarmError(e)) return STATUS[e.code] ?? 500;
  const s = (e as { status?: unknown })?.status;
  return typeof s === 'number' && s >= 400 && s < 600 ? s : 500;
};

/** The answer as an object, when it is one (a node's own handler), or a small JSON buffer (the portal's forward). */
function answerOf(ctx: Context): Record<string, unknown> | undefined {
  const b: unknown = ctx.body;
  if (Buffer.isBuffer(b) && b.length < 1 << 20) {
    try {
      return JSON.parse(b.toString('utf8')) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }
  return typeof b === 'object' && b !== null && !('pipe' in b) ? (b as Record<string, unknown>) : undefined;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? clip(v, 128) : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export function auditTrail(o: AuditTrailOptions): AuditTrail {
  const now = o.now ?? Date.now;
  const idleMs = o.idleMs ?? DEFAULT_MANUAL_IDLE_SECS * 1000;
  const sessions = new Map<string, ManualSession>();
  const iso = (ms: number) => new Date(ms).toISOString();

  const endSession = (key: string) => {
    const m = sessions.get(key);
    if (!m) return;
    sessions.delete(key);
    clearTimeout(m.timer);
    const { who, via, token_id, from, node } = m;
    o.log.record({
      at: iso(now()),
      who,
      via,
      token_id,
      from,
      action: 'remote.session_end',
      node,
      target: null,
      detail: { presses: m.presses, refused: m.refused, started: iso(m.started), last_press: iso(m.last) },
      outcome: m.outcome,
    });
  };

  const press = (w: Who, node: string | null, outcome: number) => {
    const key = JSON.stringify([w.who, w.via, w.token_id, w.from, node]);
    const t = now();
    let m = sessions.get(key);
    if (!m) {
      m = { ...w, node, started: t, last: t, presses: 0, refused: 0, outcome, timer: undefined as unknown as NodeJS.Timeout };
      sessions.set(key, m);
      o.log.record({ at: iso(t), ...w, action: 'remote.session_start', node, target: null, detail: {}, outcome });
    }
    clearTimeout(m.timer);
    m.presses++;
    if (outcome >= 400) m.refused++;
    m.last = t;
    m.outcome = outcome;
    m.timer = setTimeout(() => endSession(key), idleMs);
    m.timer.unref();
  };

  const middleware = async function recordAudit(ctx: Context, next: Next): Promise<void> {
    const route = auditRouteOf(ctx.method, ctx.path);
    if (!route) {
      await next();
      return;
    }
    let outcome: number;
    try {
      await next();
      outcome = ctx.status;
    } catch (e) {
      outcome = statusOf(e);
      if (!(outcome === 403 && !userOf(ctx))) safely(ctx, route.action, route.params, outcome);
      throw e;
    }
    safely(ctx, route.action, route.params, outcome);
  };

  /** Recording never changes the answer: a fault here is logged, and the request's own outcome stands. */
  const safely = (ctx: Context, action: AuditAction | 'remote.press', p: Record<string, string>, outcome: number) => {
    try {
      record(ctx, action, p, outcome);
    } catch (e) {
      o.logger?.error({ err: e, action, path: ctx.path }, 'audit trail: cannot make the entry of a request');
    }
  };

  const record = (ctx: Context, action: AuditAction | 'remote.press', p: Record<string, string>, outcome: number) => {
    const w = whoOf(ctx);
    const body = (ctx.request as { body?: unknown }).body;
    const req = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
    const node = o.nodeId ?? str(p.node_id ?? p.node) ?? str(req.node_id);
    if (action === 'remote.press') return press(w, node, outcome);
    const base = { at: iso(now()), ...w, action, node, outcome };
    const answer = outcome < 400 ? answerOf(ctx) : undefined;
    const entries: NewAuditEntry[] = [];
    switch (action) {
      case 'job.run': {
        const cases = req.test_cases;
        entries.push({
          ...base,
          target: str(answer?.job_uid),
          detail: { test_cases: Array.isArray(cases) ? cases.length : null, revision: str(req.test_pack_revision), api: ctx.path.toLowerCase().includes('/v1/') ? 'v1' : 'v2' },
        });
        break;
      }
      case 'job.stop':
        entries.push({ ...base, target: p.hex ? `/${p.node}/${p.hex}/${p.num}` : str(answer?.job_uid), detail: {} });
        break;
      case 'reservation.create': {
        const made = Array.isArray(answer?.reservations) ? (answer.reservations as Record<string, unknown>[]) : [];
        const detail = { duration_secs: req.duration_secs ?? null, ...(typeof req.message === 'string' && { message: clip(req.message) }) };
        for (const r of made) entries.push({ ...base, node: o.nodeId ?? str(r.node_id), target: String(r.reservation_id), detail });
        if (made.length === 0) {
          // Refused: which nodes were asked for (names only; never the body as it came, which may be anything).
          const asked = Array.isArray(req.node_ids) ? req.node_ids.filter((n): n is string => typeof n === 'string').slice(0, 20).map((n) => clip(n, 128)) : [];
          entries.push({ ...base, node: o.nodeId ?? (asked.length === 1 ? asked[0]! : null), target: null, detail: { ...detail, node_ids: asked } });
        }
        break;
      }
      case 'queue.enqueue':
        // The queued job's id, and what it waits for (never the body as it came).
        entries.push({ ...base, target: typeof answer?.queue_id === 'number' || typeof answer?.queue_id === 'string' ? String(answer.queue_id) : null, detail: { selector: str(answer?.selector), priority: answer?.priority ?? null } });
        break;
      case 'reservation.extend':
        entries.push({ ...base, target: str(p.id), detail: { duration_secs: req.duration_secs ?? null } });
        break;
      case 'node.maintenance':
        // on, and the message when put in (200 characters at most), as asked; the outcome says whether it was done.
        entries.push({ ...base, target: node, detail: { on: typeof req.on === 'boolean' ? req.on : null, ...(req.on === true && typeof req.message === 'string' && { message: clip(req.message) }) } });
        break;
      case 'power.cycle':
        // How long the outlet was off (the answer's: the outlet's default when no body named it); refused: as asked, if a number.
        entries.push({ ...base, target: null, detail: { off_secs: num(answer?.off_secs) ?? num(req.off_secs) } });
        break;
      case 'reservation.interrupt':
        entries.push({ ...base, target: str(p.id), detail: typeof req.message === 'string' ? { message: clip(req.message) } : {} });
        break;
      default:
        entries.push({ ...base, target: str(p.id), detail: {} });
    }
    for (const e of entries) o.log.record(e);
  };

  return {
    middleware,
    close: () => {
      for (const key of [...sessions.keys()]) endSession(key);
    },
    get openSessions() {
      return sessions.size;
    },
  };
}

/** `GET /api/v2/audit` (admin: the table of endpoints checks the role first; requireAuditReader holds without it). */
export function auditRouter(log: AuditLog): Router {
  const r = new Router();
  mount(r, 'GET /api/v2/audit', async (ctx) => {
    requireAuditReader(ctx);
    const q = parseAuditQuery(ctx.query, (b) => log.isCursor(b));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await log.query(q);
  });
  return r;
}

/**
 * 403 unless the caller may read the audit trail: a signed-in caller whose role permits admin, or who has no
 * role (no roles configured). On the portal every user has a role (the verifier's, the session's).
 */
export function requireAuditReader(ctx: Context): void {
  const u = userOf(ctx);
  if (!u) throw new FarmError('forbidden', 'the audit trail is for administrators: sign in, or send an access token');
  const role = u.role ?? 'admin';
  if (!permits(role, 'admin')) throw new FarmError('forbidden', `${role} may not read the audit trail`);
}
