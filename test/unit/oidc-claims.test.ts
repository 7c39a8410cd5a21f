// Sign-in with OpenID Connect, the pure parts (docs/auth.md, "Sign-in with OpenID Connect"): claims ->
// user name and role (src/core/oidc.ts), the `[oidc]` config's rules (src/config/oidc.ts), and the
// sessions an OIDC sign-in makes (src/http/session.ts: no token, the role, a bounded lifetime).
import { expect } from 'chai';
import { identityFromClaims, roleFromClaims, usernameFromClaims, type ClaimRules } from '../../src/core/oidc.js';
import { configSchema } from '../../src/config/schema.js';
import { needsToken } from '../../src/http/auth.js';
import { SESSION_IDLE_MS, SessionStore } from '../../src/http/session.js';

const rules: ClaimRules = {
  usernameClaim: 'preferred_username',
  roleClaim: 'groups',
  roleMap: { viewers: 'read', operators: 'manual', testers: 'run', admins: 'admin' },
};

describe('OIDC claims -> user name and role', () => {
  it('maps a claim value to its role; several matching values: the highest role wins, whatever their order', () => {
    expect(roleFromClaims({ groups: ['viewers'] }, rules)).to.equal('read');
    expect(roleFromClaims({ groups: ['admins', 'viewers'] }, rules)).to.equal('admin');
    expect(roleFromClaims({ groups: ['viewers', 'operators', 'testers'] }, rules)).to.equal('run');
    expect(roleFromClaims({ groups: ['other', 'operators'] }, rules)).to.equal('manual');
    // A single string is one value.
    expect(roleFromClaims({ groups: 'testers' }, rules)).to.equal('run');
  });

  it('no matching value: the default role, or none (refused) when there is no default', () => {
    expect(roleFromClaims({ groups: ['marketing'] }, rules)).to.equal(undefined);
    expect(roleFromClaims({}, rules)).to.equal(undefined);
    expect(roleFromClaims({ groups: ['marketing'] }, { ...rules, defaultRole: 'read' })).to.equal('read');
    // No role claim configured: everyone gets the default.
    expect(roleFromClaims({ groups: ['admins'] }, { roleMap: {}, defaultRole: 'manual' })).to.equal('manual');
  });

  it('ignores what is not a string, and names that are Object properties (no prototype lookup)', () => {
    expect(roleFromClaims({ groups: [42, { admins: true }, null, 'viewers'] }, rules)).to.equal('read');
    expect(roleFromClaims({ groups: { 0: 'admins' } }, rules)).to.equal(undefined);
    expect(roleFromClaims({ groups: ['constructor', '__proto__', 'toString'] }, rules)).to.equal(undefined);
  });

  it('the user name: the configured claim, else email; a value farmhand cannot take as a user name is refused', () => {
    expect(usernameFromClaims({ preferred_username: 'alice', email: 'a@example.com' }, 'preferred_username')).to.equal('alice');
    expect(usernameFromClaims({ email: 'a@example.com', sub: 'x' }, 'preferred_username')).to.equal('a@example.com');
    expect(usernameFromClaims({ sub: '248289761001' }, 'preferred_username')).to.equal(undefined);
    expect(usernameFromClaims({ preferred_username: 'Alice Smith', email: 'a@example.com' }, 'preferred_username')).to.equal(undefined);
    expect(usernameFromClaims({ upn: 'bob@lab.example' }, 'upn')).to.equal('bob@lab.example');
  });

  it('identityFromClaims says why a person may not sign in', () => {
    expect(identityFromClaims({ preferred_username: 'alice', groups: ['testers'] }, rules)).to.deep.equal({ login: 'alice', role: 'run' });
    const noRole = identityFromClaims({ preferred_username: 'bob', groups: ['marketing'] }, rules);
    expect(noRole).to.include({ problem: 'no_role' });
    expect((noRole as { message: string }).message).to.match(/\(bob\) has no role here/);
    expect(identityFromClaims({ sub: 'x', groups: ['admins'] }, rules)).to.include({ problem: 'no_username' });
  });
});

describe('the [oidc] config', () => {
  const base = { test_pack: { url: '/tmp/pack' } };
  const oidc = { issuer: 'https://sso.example/realms/lab', client_id: 'farmhand', client_secret_file: '/etc/farmhand/oidc-secret', default_role: 'read' };
  const problems = (o: unknown) => {
    const r = configSchema.safeParse({ ...base, oidc: o });
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('takes a minimal section, with its defaults', () => {
    const cfg = configSchema.parse({ ...base, oidc });
    expect(cfg.oidc).to.include({ scopes: 'openid profile email', username_claim: 'preferred_username', session_max_hours: 12, name: 'single sign-on' });
    expect(configSchema.parse(base).oidc).to.equal(undefined);
  });

  it('refuses an issuer over http unless it is on this host, a secret given twice or not at all, and a config nobody could sign in with', () => {
    expect(problems({ ...oidc, issuer: 'http://sso.example' }).join()).to.match(/must be https/);
    expect(problems({ ...oidc, issuer: 'http://localhost:9000' })).to.deep.equal([]);
    expect(problems({ ...oidc, client_secret: 's' }).join()).to.match(/one of client_secret_file/);
    expect(problems({ issuer: oidc.issuer, client_id: 'x', default_role: 'read' }).join()).to.match(/one of client_secret_file/);
    expect(problems({ ...oidc, default_role: undefined }).join()).to.match(/nobody could sign in/);
    expect(problems({ ...oidc, default_role: undefined, role_claim: 'groups', role_map: { lab: 'run' } })).to.deep.equal([]);
    expect(problems({ ...oidc, role_map: { lab: 'superuser' } }).join()).to.match(/role_map/);
    expect(problems({ ...oidc, redirect_url: 'https://farm.example/elsewhere' }).join()).to.match(/\/app\/oidc\/callback/);
    expect(problems({ ...oidc, scopes: 'profile email' }).join()).to.match(/openid/);
  });
});

describe('sessions of an OIDC sign-in', () => {
  const noTokens = { verify: () => undefined };

  it('carry the role, need no token, and end at their own lifetime even while in use', () => {
    let now = 0;
    const store = new SessionStore(noTokens, () => now);
    const s = store.createOidc({ login: 'alice', role: 'run', maxMs: 12 * 3600 * 1000 });
    expect(s).to.include({ login: 'alice', role: 'run', tokenId: 'oidc:alice' });
    expect(s.token).to.equal(undefined);
    // Used every few hours (never idle), a token session would live on for a week; this one ends at 12 hours.
    for (now = 0; now <= 12 * 3600 * 1000; now += 3 * 3600 * 1000) expect(store.get(s.id), `at ${now} ms`).to.equal(s);
    now = 12 * 3600 * 1000 + 1;
    expect(store.get(s.id)).to.equal(undefined);
    expect(store.isLive(s)).to.equal(false);
  });

  it('end when idle too long, as token sessions do', () => {
    let now = 0;
    const store = new SessionStore(noTokens, () => now);
    const s = store.createOidc({ login: 'alice', role: 'read', maxMs: 12 * 3600 * 1000 });
    now = SESSION_IDLE_MS + 1;
    expect(store.get(s.id)).to.equal(undefined);
  });
});

describe('the OIDC routes are open like the sign-in form', () => {
  it('need no token even with auth.v1_requires_token (a person must reach them to sign in at all)', () => {
    for (const p of ['/app/sign-in/oidc', '/app/oidc/callback', '/APP/OIDC/CALLBACK', '/app/sign-in/OIDC']) {
      expect(needsToken(p, { v1RequiresToken: true }), p).to.equal(false);
    }
    // Their neighbours are not.
    expect(needsToken('/app/oidc', { v1RequiresToken: true })).to.equal(true);
    expect(needsToken('/app/oidc/callback/x', { v1RequiresToken: true })).to.equal(true);
  });
});
