/**
 * Sign-in with OpenID Connect, the pure part (docs/auth.md, "Sign-in with OpenID Connect"): which
 * user name and which role the provider's claims give a person. The flow itself (discovery, PKCE,
 * state, nonce, the code exchange) is src/http/oidc.ts, over openid-client.
 */
import { isValidUserName } from './auth.js';
import { ROLES, type Role } from './roles.js';

/** What the mapping needs of the `[oidc]` settings. */
export interface ClaimRules {
  /** The claim holding the user name; when it is absent, `email`. */
  usernameClaim: string;
  /** The claim holding the person's groups or roles (a string or an array of strings); absent: no mapping. */
  roleClaim?: string;
  /** Claim value -> role. */
  roleMap: Readonly<Record<string, Role>>;
  /** The role of a person no mapping matches; absent: such a person may not sign in. */
  defaultRole?: Role;
}

/** A sign-in the claims do not allow, with what to tell the person. */
export type ClaimProblem = { problem: 'no_username'; message: string } | { problem: 'no_role'; message: string };

/** The values of a claim: a string is one value, an array its string members; anything else none. */
export function claimValues(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

/**
 * The role the claims map to: of every value of the role claim that `roleMap` names, the highest role
 * (read < manual < run < admin); none matching, `defaultRole` (which may be undefined: refused).
 */
export function roleFromClaims(claims: Readonly<Record<string, unknown>>, rules: Pick<ClaimRules, 'roleClaim' | 'roleMap' | 'defaultRole'>): Role | undefined {
  let best = -1;
  if (rules.roleClaim) {
    for (const v of claimValues(claims[rules.roleClaim])) {
      const role = Object.hasOwn(rules.roleMap, v) ? rules.roleMap[v] : undefined;
      if (role !== undefined) best = Math.max(best, ROLES.indexOf(role));
    }
  }
  return best >= 0 ? ROLES[best] : rules.defaultRole;
}

/** The user name the claims give: `usernameClaim`, else `email`; it must be a valid farmhand user name. */
export function usernameFromClaims(claims: Readonly<Record<string, unknown>>, usernameClaim: string): string | undefined {
  for (const name of [usernameClaim, 'email']) {
    const v = claims[name];
    if (typeof v === 'string' && v !== '') return isValidUserName(v) ? v : undefined;
  }
  return undefined;
}

/** Who the claims make the person, or why they may not sign in. */
export function identityFromClaims(claims: Readonly<Record<string, unknown>>, rules: ClaimRules): { login: string; role: Role } | ClaimProblem {
  const login = usernameFromClaims(claims, rules.usernameClaim);
  if (login === undefined) {
    return {
      problem: 'no_username',
      message: `the identity provider gave no usable user name (claim "${rules.usernameClaim}", else "email"; 1 to 64 letters, digits, ".", "_", "@" or "-"): ask its administrator to set one for your account`,
    };
  }
  const role = roleFromClaims(claims, rules);
  if (role === undefined) {
    return {
      problem: 'no_role',
      message: `your account (${login}) has no role here: none of its ${rules.roleClaim ? `"${rules.roleClaim}" values` : 'claims'} is mapped to a role. Ask an administrator to add you to a group that is`,
    };
  }
  return { login, role };
}
