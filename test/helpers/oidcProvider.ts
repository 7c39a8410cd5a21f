/**
 * A real OpenID provider for the sign-in tests: oidc-provider (certified), in the test process, on a
 * free port of `localhost` (another site than the node's 127.0.0.1, as a real provider is). Its own
 * development login form (any login, any password) signs a person in; the claims of each login are
 * the test's to set. Consent is taken as given (loadExistingGrant), as a company's provider does for
 * its own applications.
 *
 * The server listens before the provider exists, so a test can give the node the issuer URL, start
 * the node, and only then register the client with the node's redirect URL (the node's port is known
 * only then). Until `register`, and after `down()`, every connection is cut: the provider is down.
 */
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type ProviderContext } from 'oidc-provider';
import type { Page } from 'playwright-core';

export const CLIENT_ID = 'farmhand-test';
export const CLIENT_SECRET = 'a-test-client-secret-of-enough-length-0123456789';

export interface TestProvider {
  /** `http://localhost:<port>` */
  issuer: string;
  /** The claims a login gets (besides `sub`, which is the login). */
  claims: Map<string, Record<string, unknown>>;
  /** Start answering, with the client registered for these redirect URLs. */
  register(redirectUris: string[]): void;
  /** Cut every connection from now on (and answer again with `up()`). */
  down(): void;
  up(): void;
  stop(): Promise<void>;
}

export async function startTestProvider(): Promise<TestProvider> {
  let handler: ((req: http.IncomingMessage, res: http.ServerResponse) => void) | undefined;
  let answering = false;
  const server = http.createServer((req, res) => {
    if (!answering || !handler) {
      req.socket.destroy();
      return;
    }
    handler(req, res);
  });
  // Both loopback addresses: Chromium may try ::1 for localhost, Node 127.0.0.1.
  await new Promise<void>((resolve) => server.listen(0, resolve));
  const issuer = `http://localhost:${(server.address() as AddressInfo).port}`;
  const claims = new Map<string, Record<string, unknown>>();
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), use: 'sig', kid: 'test' };
  return {
    issuer,
    claims,
    register(redirectUris) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: CLIENT_ID,
            client_secret: CLIENT_SECRET,
            redirect_uris: redirectUris,
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        jwks: { keys: [jwk] },
        ttl: { Interaction: 600, Grant: 600, Session: 600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
        cookies: { keys: ['a-test-cookie-key'] },
        claims: { openid: ['sub'], profile: ['preferred_username', 'name', 'groups', 'roles'], email: ['email', 'email_verified'] },
        findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ ...(claims.get(id) ?? {}), sub: id }) }),
        loadExistingGrant: async (ctx: ProviderContext) => {
          const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
          grant.addOIDCScope('openid profile email');
          await grant.save();
          return grant;
        },
      });
      handler = provider.callback();
      answering = true;
    },
    down() {
      answering = false;
      server.closeAllConnections();
    },
    up() {
      answering = true;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Who the page's session is at the portal: `GET /api/v2/user`'s status and login. */
export const whoAmI = (page: Page) =>
  page.evaluate(async () => {
    const r = await fetch('/api/v2/user');
    return { status: r.status, login: ((await r.json()) as { login?: string }).login };
  });
