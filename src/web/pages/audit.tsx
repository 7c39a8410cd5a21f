/**
 * The audit trail's page (`/app/audit`, docs/auth.md "Audit trail"): the entries of `GET /api/v2/audit`,
 * newest first, its filters as a GET form, a link to the next (older) page. Administrators only, on a node
 * (its data directory) and on the farm's portal (PostgreSQL): the same page over either log.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { VNode } from 'preact';
import { AUDIT_ACTIONS, parseAuditQuery, type AuditEntry, type AuditLog, type AuditPage } from '../../core/audit.js';
import { isFarmError } from '../../core/errors.js';
import { requireAuditReader } from '../../http/audit.js';
import { userOf } from '../../http/auth.js';
import { sendPage, wantsPage } from '../layout.js';

const FIELDS = ['user', 'action', 'node', 'since', 'until', 'limit'] as const;
type Params = Partial<Record<(typeof FIELDS)[number] | 'before', string>>;

const FAMILIES = [...new Set(AUDIT_ACTIONS.map((a) => a.split('.')[0]!))];

function paramsOf(ctx: Context): Params {
  const p: Params = {};
  for (const k of [...FIELDS, 'before'] as const) {
    const v = ctx.query[k];
    if (typeof v === 'string' && v !== '') p[k] = v;
  }
  return p;
}

const detailText = (d: Record<string, unknown>): string =>
  Object.entries(d)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');

function Row({ e }: { e: AuditEntry }): VNode {
  return (
    <tr data-action={e.action}>
      <td class="at">
        <time dateTime={e.at}>{e.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>
      </td>
      <td class="who">{e.who}</td>
      <td class="via">{e.via}</td>
      <td class="from">{e.from ?? ''}</td>
      <td class="action">{e.action}</td>
      <td class="node">{e.node ?? ''}</td>
      <td class="target">{e.target ?? ''}</td>
      <td class="num outcome">{e.outcome}</td>
      <td class="detail">{detailText(e.detail)}</td>
    </tr>
  );
}

function AuditList({ p, page, problem }: { p: Params; page?: AuditPage; problem?: string }): VNode {
  const older = page?.next_before ? `/app/audit?${new URLSearchParams({ ...Object.fromEntries(FIELDS.flatMap((k) => (p[k] ? [[k, p[k]]] : []))), before: page.next_before }).toString()}` : undefined;
  return (
    <section class="audit">
      <h1>Audit trail</h1>
      <form class="audit-filters" method="get" action="/app/audit" role="search">
        <label>
          User <input name="user" value={p.user ?? ''} size={12} />
        </label>{' '}
        <label>
          Action{' '}
          <select name="action">
            <option value="">any</option>
            {FAMILIES.map((f) => (
              <option value={f} selected={p.action === f}>{`${f}.*`}</option>
            ))}
            {AUDIT_ACTIONS.map((a) => (
              <option value={a} selected={p.action === a}>
                {a}
              </option>
            ))}
          </select>
        </label>{' '}
        <label>
          Node <input name="node" value={p.node ?? ''} size={12} />
        </label>{' '}
        <label>
          Since <input name="since" value={p.since ?? ''} placeholder="2026-03-04" size={20} />
        </label>{' '}
        <label>
          Until <input name="until" value={p.until ?? ''} placeholder="2026-03-04T18:00:00Z" size={20} />
        </label>{' '}
        <label>
          Limit <input name="limit" value={p.limit ?? ''} placeholder="100" size={5} inputMode="numeric" />
        </label>{' '}
        <button type="submit">Filter</button>
      </form>
      {problem ? (
        <p id="audit-error" class="filter-error" role="alert">
          {problem}
        </p>
      ) : null}
      {page && page.entries.length === 0 ? <p id="no-entries">No entries match.</p> : null}
      {page && page.entries.length > 0 ? (
        <table class="results audit" id="audit">
          <caption class="visually-hidden">Audit entries, newest first</caption>
          <thead>
            <tr>
              {['Time (UTC)', 'Who', 'Via', 'From', 'Action', 'Node', 'Target', 'Outcome', 'Detail'].map((h) => (
                <th scope="col">{h}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {page.entries.map((e) => (
              <Row e={e} />
            ))}
          </tbody>
        </table>
      ) : null}
      {older ? (
        <p>
          <a id="audit-older" href={older}>
            Older entries
          </a>
        </p>
      ) : null}
    </section>
  );
}

/** `/app/audit` over `log`; who may, as for `GET /api/v2/audit` (src/http/audit.ts). */
export function auditPageRouter(log: AuditLog, o: { farm?: boolean } = {}): Router {
  const r = new Router();
  r.get('/app/audit', async (ctx) => {
    const opts = { title: 'Audit trail', ...(o.farm && { farm: true }) };
    if (!userOf(ctx) && wantsPage(ctx)) {
      ctx.status = 303;
      ctx.redirect(`/app/sign-in?next=${encodeURIComponent(ctx.originalUrl)}`);
      return;
    }
    requireAuditReader(ctx);
    const p = paramsOf(ctx);
    let page: AuditPage;
    try {
      page = await log.query(parseAuditQuery(p, (b) => log.isCursor(b)));
    } catch (e) {
      if (!isFarmError(e) || e.code !== 'invalid_filter' || !wantsPage(ctx)) throw e;
      sendPage(ctx, <AuditList p={p} problem={e.message} />, opts, 400);
      return;
    }
    sendPage(ctx, <AuditList p={p} page={page} />, opts);
  });
  return r;
}
