/**
 * The portal's `replicas` key (docs/farm.md, "Many portals"): "single" by default (the portal lock), "many"
 * needs where the other replicas reach this one and the shared secret's file, resolved beside the config.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError } from '../../src/config/load.js';
import { loadPortalConfig } from '../../src/farm/portal/config.js';

const write = (o: unknown) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'portal-replicas-cfg-'));
  const f = path.join(dir, 'portal.json');
  writeFileSync(f, JSON.stringify({ database: 'postgresql:///farm?host=/run/postgresql', storage_dir: 'store', ...(o as object) }));
  return { f, dir };
};

const problems = (f: string): string => {
  try {
    loadPortalConfig(f);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems.join('\n');
  }
  throw new Error('the config was accepted');
};

describe('farm portal config: replicas', () => {
  it('defaults to one portal per database ("single"), a lease of 10 s', () => {
    expect(loadPortalConfig(write({}).f).replicas).to.deep.equal({ mode: 'single', lease_secs: 10, hold_secs: 10 });
  });

  it('"many" needs advertise_url and secret_file; secret_file is resolved beside the config', () => {
    const p = problems(write({ replicas: { mode: 'many' } }).f);
    expect(p).to.contain('replicas.advertise_url: required with mode "many"');
    expect(p).to.contain('replicas.secret_file: required with mode "many"');
    const { f, dir } = write({ replicas: { mode: 'many', replica_id: 'p1', advertise_url: 'http://10.0.0.5:8080', secret_file: 'replica.secret', lease_secs: 4 } });
    expect(loadPortalConfig(f).replicas).to.deep.equal({
      mode: 'many',
      replica_id: 'p1',
      advertise_url: 'http://10.0.0.5:8080',
      secret_file: path.join(dir, 'replica.secret'),
      lease_secs: 4,
      hold_secs: 10,
    });
  });

  it('refuses an unknown mode, a bad replica id, a lease too short and unknown keys, all at once', () => {
    const p = problems(write({ replicas: { mode: 'several', replica_id: 'no spaces', lease_secs: 0.1, extra: 1 } }).f);
    for (const k of ['replicas.mode', 'replicas.replica_id', 'replicas.lease_secs', 'extra']) expect(p).to.contain(k);
  });
});
