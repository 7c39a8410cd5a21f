/**
 * The 403 of a role check (src/http/endpoints/authorize.ts) as a page, for a person in a browser: a
 * signed-in person who opens a page her role may not see (the live view as `read`, the audit trail as
 * `run`) gets a page in the site's layout saying who she is, her role, what the page needs and whom to
 * ask, instead of the API's JSON. Everyone else (programs, `/api/...`, anything not asking for HTML)
 * keeps the JSON `{"error": "forbidden", ...}` (docs/auth.md, "Roles": "A 403 in a browser").
 */
import type { Context, Middleware, Next } from 'koa';
import type { VNode } from 'preact';
import { isFarmError } from '../../core/errors.js';
import { isRole, type Role } from '../../core/roles.js';
import { asksForPage, userOf } from '../../http/auth.js';
import { sendPage } from '../layout.js';

/** What the role check puts in its error's details. */
interface Refusal {
  role: Role;
  need: Role;
  action: string;
}

const refusalOf = (d: Record<string, unknown> | undefined): Refusal | undefined =>
  d && isRole(d.role) && isRole(d.need) && typeof d.action === 'string' ? { role: d.role, need: d.need, action: d.action } : undefined;

export interface ForbiddenPageOptions {
  /** The farm's portal (its navigation, "the farm's administrators"); default: a node. */
  farm?: boolean;
  /**
   * The users who may change roles here (the node's tokens file's `admin` users; the portal's `users` with
   * role `admin`), named on the page as whom to ask. Absent, empty or failing: the page says "an administrator".
   */
  admins?: () => Promise<string[]> | string[];
}

/** At most this many administrators are named (a farm may have many). */
const MAX_NAMED = 5;

function ForbiddenPage(p: { login: string; r: Refusal; farm: boolean; admins: string[]; path: string }): VNode {
  const where = p.farm ? 'the farm' : 'this node';
  return (
    <section class="panel forbidden" id="forbidden">
      <h1>You may not open this page</h1>
      <p>
        You are signed in as <strong class="forbidden-login">{p.login}</strong> with the role <strong class="forbidden-role">{p.r.role}</strong>.
      </p>
      <p>
        <code>{p.path}</code> is for users who may {p.r.action}: it needs the role <strong class="forbidden-need">{p.r.need}</strong> or above.
      </p>
      <p class="forbidden-ask">
        Ask {p.admins.length > 0 ? <>an administrator of {where} ({p.admins.join(', ')})</> : <>an administrator of {where}</>} to give your user the role{' '}
        {p.r.need}, or sign in as a user who has it.
      </p>
      <p>
        <a href="/">Back to the front page</a>
      </p>
    </section>
  );
}

async function adminsOf(o: ForbiddenPageOptions): Promise<string[]> {
  try {
    const all = (await o.admins?.()) ?? [];
    return all.slice(0, MAX_NAMED);
  } catch {
    return []; // the page must not fail because the list could not be read (PostgreSQL away)
  }
}

/**
 * Mount before the routers: turns a role check's 403 into the page for a GET or HEAD of `/` or `/app/...`
 * that asks for `text/html` from a signed-in caller. Any other error, or any other caller, passes on unchanged.
 */
export function forbiddenPages(o: ForbiddenPageOptions = {}): Middleware {
  return async function forbiddenPage(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
    } catch (e) {
      const r = isFarmError(e) && e.code === 'forbidden' ? refusalOf(e.details) : undefined;
      const user = userOf(ctx);
      if (!r || !user || !asksForPage(ctx)) throw e;
      const admins = await adminsOf(o);
      sendPage(ctx, <ForbiddenPage login={user.login} r={r} farm={o.farm ?? false} admins={admins} path={ctx.path} />, { title: 'Not allowed', ...(o.farm && { farm: true }) }, 403);
    }
  };
}
