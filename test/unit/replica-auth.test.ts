/**
 * The replicas' signature (src/farm/portal/replicaAuth.ts): a signed request is believed only as signed, with the
 * farm's secret, within 30 s; and the `replicas` config key of the shared design.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ConfigError } from '../../src/config/load.js';
import { parsePortalConfig } from '../../src/farm/portal/config.js';
import { MAX_SKEW_MS, REPLICA_SIGNATURE_HEADER, REPLICA_USER_HEADER, signReplicaRequest, verifyReplicaRequest } from '../../src/farm/portal/replicaAuth.js';

describe('replica signatures', () => {
  const secret = randomBytes(32);
  const now = 1_800_000_000_000;
  const path = '/api/v2/nodes/n1/press?x=1';
  const caller = { replica: 'pb', user: 'alice smith', role: 'run' as const };

  it('names the caller of a request signed with the secret', () => {
    const h = signReplicaRequest(secret, 'POST', path, caller, now);
    expect(verifyReplicaRequest(secret, 'POST', path, h, now + 1000)).to.deep.equal(caller);
    const anon = signReplicaRequest(secret, 'GET', '/app/nodes/n1/live', { replica: 'pb', user: '', role: undefined }, now);
    expect(verifyReplicaRequest(secret, 'GET', '/app/nodes/n1/live', anon, now)).to.deep.equal({ replica: 'pb', user: '', role: undefined });
  });

  it('refuses another method, path, user, role, replica, secret, a stale or future time, and no secret at all', () => {
    const h = signReplicaRequest(secret, 'POST', path, caller, now);
    const refused = (r: unknown) => expect(r).to.have.property('refused');
    refused(verifyReplicaRequest(secret, 'GET', path, h, now));
    refused(verifyReplicaRequest(secret, 'POST', '/api/v2/nodes/n2/press?x=1', h, now));
    refused(verifyReplicaRequest(secret, 'POST', path, { ...h, [REPLICA_USER_HEADER]: 'admin' }, now));
    refused(verifyReplicaRequest(secret, 'POST', path, { ...h, [REPLICA_SIGNATURE_HEADER]: h[REPLICA_SIGNATURE_HEADER]!.replace('role=run', 'role=admin') }, now));
    refused(verifyReplicaRequest(secret, 'POST', path, { ...h, 'x-farmhand-replica': 'pc' }, now));
    refused(verifyReplicaRequest(randomBytes(32), 'POST', path, h, now));
    refused(verifyReplicaRequest(secret, 'POST', path, h, now + MAX_SKEW_MS + 1));
    refused(verifyReplicaRequest(secret, 'POST', path, h, now - MAX_SKEW_MS - 1));
    refused(verifyReplicaRequest(undefined, 'POST', path, h, now));
    refused(verifyReplicaRequest(secret, 'POST', path, { [REPLICA_USER_HEADER]: 'alice' }, now));
    const bad = signReplicaRequest(secret, 'POST', path, { replica: 'pb', user: 'alice', role: 'root' as never }, now);
    refused(verifyReplicaRequest(secret, 'POST', path, bad, now));
  });

  it('config: mode "many" needs advertise_url and secret_file; "single" is the default', () => {
    const base = { database: 'postgresql:///farm', storage_dir: '/tmp/x' };
    expect(parsePortalConfig(base).replicas).to.deep.include({ mode: 'single', lease_secs: 10 });
    expect(() => parsePortalConfig({ ...base, replicas: { mode: 'many' } }))
      .to.throw(ConfigError)
      .with.property('message')
      .that.matches(/replicas\.advertise_url/)
      .and.matches(/replicas\.secret_file/);
    const ok = parsePortalConfig({ ...base, replicas: { mode: 'many', advertise_url: 'http://10.0.0.5:8080', secret_file: 'replica.secret' } }, '/etc/farmhand');
    expect(ok.replicas.secret_file).to.equal('/etc/farmhand/replica.secret');
  });
});
