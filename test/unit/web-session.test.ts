// The session store (src/http/session.ts) with a fake clock and a verifier that can revoke:
// idle and absolute expiry, revocation, ids and CSRF tokens, the size bound.
import { expect } from 'chai';
import type { TokenVerifier } from '../../src/core/auth.js';
import { csrfMatches, SESSION_IDLE_MS, SESSION_LIMIT, SESSION_MAX_MS, SESSIONS_PER_USER, SessionStore } from '../../src/http/session.js';

function fakeVerifier() {
  const valid = new Map<string, string>();
  const verifier: TokenVerifier = {
    verify: (t) => (valid.has(t) ? { user: valid.get(t)!, tokenId: t.slice(3, 11) } : undefined),
  };
  return { valid, verifier };
}

const TOKEN = 'fh_0123abcd_' + 'x'.repeat(43);

describe('web session store', () => {
  it('makes a session only for a valid token, with distinct 256-bit id and CSRF token', () => {
    const { valid, verifier } = fakeVerifier();
    const store = new SessionStore(verifier, () => 0);
    expect(store.create(TOKEN)).to.equal(undefined);
    valid.set(TOKEN, 'alice');
    const s = store.create(TOKEN)!;
    expect(s.login).to.equal('alice');
    expect(s.tokenId).to.equal('0123abcd');
    expect(Buffer.from(s.id, 'base64url')).to.have.length(32);
    expect(Buffer.from(s.csrf, 'base64url')).to.have.length(32);
    expect(s.id).to.not.equal(s.csrf);
    expect(store.get(s.id)).to.equal(s);
    expect(csrfMatches(s, s.csrf)).to.equal(true);
    expect(csrfMatches(s, s.csrf.slice(1))).to.equal(false);
    expect(csrfMatches(s, undefined)).to.equal(false);
  });

  it('ends a session idle too long, or too old however used', () => {
    const { valid, verifier } = fakeVerifier();
    valid.set(TOKEN, 'alice');
    let now = 0;
    const store = new SessionStore(verifier, () => now);
    const idle = store.create(TOKEN)!;
    now += SESSION_IDLE_MS + 1;
    expect(store.get(idle.id)).to.equal(undefined);
    const used = store.create(TOKEN)!;
    // Used every half idle period: alive until the absolute limit.
    while (now + SESSION_IDLE_MS / 2 - used.created <= SESSION_MAX_MS) {
      now += SESSION_IDLE_MS / 2;
      expect(store.get(used.id), `at ${now}`).to.equal(used);
    }
    now = used.created + SESSION_MAX_MS + 1;
    expect(store.get(used.id)).to.equal(undefined);
  });

  it('ends the sessions of a revoked token', () => {
    const { valid, verifier } = fakeVerifier();
    valid.set(TOKEN, 'alice');
    const store = new SessionStore(verifier, () => 0);
    const a = store.create(TOKEN)!;
    const b = store.create(TOKEN)!;
    valid.delete(TOKEN);
    expect(store.get(a.id)).to.equal(undefined);
    expect(store.get(b.id)).to.equal(undefined);
    expect(store.size).to.equal(0);
  });

  it('keeps at most SESSION_LIMIT sessions, dropping the least recently used', () => {
    const { valid, verifier } = fakeVerifier();
    // One user per token: the per-user cap is not what is tested here.
    const token = (i: number) => `fh_${i.toString(16).padStart(8, '0')}_${'x'.repeat(43)}`;
    for (let i = 0; i <= SESSION_LIMIT; i++) valid.set(token(i), `user${i}`);
    const store = new SessionStore(verifier, () => 0);
    const first = store.create(token(0))!;
    const second = store.create(token(1))!;
    store.get(first.id);
    for (let i = 2; i <= SESSION_LIMIT; i++) store.create(token(i));
    expect(store.size).to.equal(SESSION_LIMIT);
    expect(store.get(first.id), 'used recently').to.equal(first);
    expect(store.get(second.id), 'least recently used').to.equal(undefined);
  });

  it("one user's sign-ins past SESSIONS_PER_USER drop only that user's least recently used sessions, never another user's", () => {
    const { valid, verifier } = fakeVerifier();
    const BOB = 'fh_0b0b0b0b_' + 'y'.repeat(43);
    valid.set(TOKEN, 'alice');
    valid.set(BOB, 'bob');
    const store = new SessionStore(verifier, () => 0);
    const bob = store.create(BOB)!;
    const ended: string[] = [];
    store.onEnd((s) => ended.push(s.login));
    const aliceFirst = store.create(TOKEN)!;
    const aliceSecond = store.create(TOKEN)!;
    // As many sign-ins as it took to evict everyone before: 10,001.
    for (let i = 0; i < SESSION_LIMIT + 1; i++) store.create(TOKEN);
    expect(store.size).to.equal(SESSIONS_PER_USER + 1);
    expect(store.get(bob.id), "bob's session survives").to.equal(bob);
    expect(store.get(aliceFirst.id), "alice's oldest is gone").to.equal(undefined);
    expect(store.get(aliceSecond.id)).to.equal(undefined);
    expect(ended.every((l) => l === 'alice') && ended.length === SESSION_LIMIT + 3 - SESSIONS_PER_USER, 'every drop was one of alice\'s, and reported').to.equal(true);
  });
});
