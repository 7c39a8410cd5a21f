/**
 * The `oidc` section of the node's and the portal's config (docs/auth.md, "Sign-in with OpenID
 * Connect"; docs/configuration.md). Absent: no OIDC sign-in, tokens only, as before.
 */
import { z } from 'zod';
import { ROLES } from '../core/roles.js';

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** https, or http to a provider on this very host (loopback): nothing else can see its traffic. */
const issuerUrl = z
  .url({ protocol: /^https?$/, error: 'must be the provider\'s https:// issuer URL, e.g. https://sso.example/realms/lab' })
  .refine((u) => {
    const p = new URL(u);
    return p.protocol === 'https:' || LOOPBACK.test(p.hostname);
  }, 'must be https:// (http:// only for a provider on this host: localhost, 127.x.x.x, [::1])');

const role = z.enum(ROLES);

export const oidcSchema = z
  .strictObject({
    /** The provider's issuer URL; its /.well-known/openid-configuration is read at the first sign-in. */
    issuer: issuerUrl,
    /** Shown on the sign-in page's button: "Sign in with <name>". */
    name: z.string().min(1).max(60).default('single sign-on'),
    client_id: z.string().min(1),
    /** The client secret in the config itself; prefer `client_secret_file`. */
    client_secret: z.string().min(1).optional(),
    /** A file holding the client secret alone (read at start; not world-readable, like the node credential). */
    client_secret_file: z.string().min(1).optional(),
    /**
     * The callback's public URL, registered at the provider, e.g. https://farm.example/app/oidc/callback.
     * Default: `public_url` + `/app/oidc/callback`, else the request's own host.
     */
    redirect_url: z.url({ protocol: /^https?$/, error: 'must be an http(s):// URL ending in /app/oidc/callback' }).refine((u) => new URL(u).pathname === '/app/oidc/callback', 'the path must be /app/oidc/callback').optional(),
    scopes: z.string().regex(/(^|\s)openid(\s|$)/, 'must include openid').default('openid profile email'),
    /** The claim holding the user name; when the claim is absent, `email`. */
    username_claim: z.string().min(1).default('preferred_username'),
    /** The claim listing the person's groups or roles, e.g. `groups` (Keycloak, Authentik) or `roles` (Azure AD app roles). */
    role_claim: z.string().min(1).optional(),
    /** role_claim value -> role; several matching values: the highest role. */
    role_map: z.record(z.string(), role).default({}),
    /** The role of a person no mapping matches; unset: such a person may not sign in. */
    default_role: role.optional(),
    /** A session made by OIDC sign-in ends this long after sign-in at the latest (a role change at the provider applies at the next sign-in). */
    session_max_hours: z.number().positive().max(168).default(12),
  })
  .refine((o) => (o.client_secret === undefined) !== (o.client_secret_file === undefined), {
    message: 'set one of client_secret_file (preferred) or client_secret',
    path: ['client_secret_file'],
  })
  .refine((o) => o.default_role !== undefined || (o.role_claim !== undefined && Object.keys(o.role_map).length > 0), {
    message: 'nobody could sign in: set role_claim and role_map, or default_role',
    path: ['role_map'],
  })
  .optional();

export type OidcConfig = NonNullable<z.infer<typeof oidcSchema>>;
