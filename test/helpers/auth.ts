/** A supertest client that sends a v2 token of a user, created the way `farmhand token create` does. */
import request from 'supertest';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { checked } from './contract.js';
import type { TestDaemon } from './daemon.js';
import type { TestFarm } from './farm.js';

export async function asUser(d: TestDaemon & { farm?: Pick<TestFarm, 'tokenFor'> }, login: string) {
  // Behind a portal (test/helpers/farm.ts) tokens are the farm's, in PostgreSQL.
  const token = d.farm ? await d.farm.tokenFor(login) : (await new TokenStore(tokensFile(d.dataDir)).create(login)).token;
  const agent = checked(request(d.url));
  const wrap = (m: 'get' | 'post' | 'put' | 'delete') => (p: string) => agent[m](p).set('Authorization', `token ${token}`);
  return { token, get: wrap('get'), post: wrap('post'), put: wrap('put'), delete: wrap('delete') };
}
