/** The service unit and the appliance installer. */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ensureBuilt } from '../helpers/build.js';

const run = promisify(execFile);

describe('systemd unit and installer', function () {
  this.timeout(60_000);
  let root: string;
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-install-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  it('systemd-analyze verify passes on systemd/farmhand.service', async () => {
    const { stderr } = await run('systemd-analyze', ['verify', path.resolve('systemd/farmhand.service')]).catch((e: { stderr: string; code: number }) => {
      throw new Error(`systemd-analyze verify failed (${e.code}): ${e.stderr}`);
    });
    // verify warns about the unit's absolute paths that only exist once installed; nothing else.
    for (const line of stderr.split('\n').filter(Boolean)) expect(line).to.match(/\/opt\/farmhand|farmhand\.service: Command .* is not executable/);
  });

  it('is Type=notify with a watchdog, no restart loop on a bad config (78), and the hardening options', async () => {
    const unit = await readFile('systemd/farmhand.service', 'utf8');
    for (const line of ['Type=notify', 'NotifyAccess=all', 'WatchdogSec=', 'RestartPreventExitStatus=78', 'StateDirectory=farmhand', 'NoNewPrivileges=yes', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes', 'SupplementaryGroups=video dialout', 'KillMode=mixed']) {
      expect(unit).to.include(line);
    }
  });

  it('gives the daemon only what running tests as farmhand-test needs: three capabilities and that group', async () => {
    const unit = await readFile('systemd/farmhand.service', 'utf8');
    const setting = (key: string) => unit.split('\n').filter((l) => l.startsWith(`${key}=`));
    expect(setting('CapabilityBoundingSet')).to.deep.equal(['CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_KILL']);
    expect(setting('AmbientCapabilities')).to.deep.equal(['AmbientCapabilities=CAP_SETUID CAP_SETGID CAP_KILL']);
    expect(setting('SupplementaryGroups')).to.deep.equal(['SupplementaryGroups=video dialout farmhand-test']);
    for (const line of ['NoNewPrivileges=yes', 'RestrictSUIDSGID=yes', 'UMask=0027', 'StateDirectoryMode=0711']) expect(unit).to.include(line);
  });

  it('systemd-analyze verify passes on systemd/farmhand-portal.service; it waits for PostgreSQL and keeps the hardening', async () => {
    const { stderr } = await run('systemd-analyze', ['verify', path.resolve('systemd/farmhand-portal.service')]).catch((e: { stderr: string; code: number }) => {
      throw new Error(`systemd-analyze verify failed (${e.code}): ${e.stderr}`);
    });
    for (const line of stderr.split('\n').filter(Boolean)) expect(line).to.match(/\/opt\/farmhand|farmhand-portal\.service: Command .* is not executable/);
    const unit = await readFile('systemd/farmhand-portal.service', 'utf8');
    for (const line of ['After=network-online.target postgresql.service', 'Wants=network-online.target postgresql.service', 'portal --config /etc/farmhand/portal.json', 'RestartPreventExitStatus=78', 'StateDirectory=farmhand-portal', 'NoNewPrivileges=yes', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes', 'PrivateDevices=yes', 'CapabilityBoundingSet=', 'User=farmhand']) {
      expect(unit).to.include(line);
    }
  });

  it('scripts/install-appliance.sh --root installs the unit, the project and a config that farmhand accepts', async () => {
    await ensureBuilt(); // the installer copies dist/
    await run('bash', ['scripts/install-appliance.sh', '--root', root, '--test-pack', 'https://git.example.invalid/tests.git']);
    expect((await stat(path.join(root, 'etc/systemd/system/farmhand.service'))).isFile()).to.equal(true);
    expect((await stat(path.join(root, 'opt/farmhand/python/farmhand/__init__.py'))).isFile()).to.equal(true);
    const { loadConfig } = await import('../../src/config/load.js');
    const cfg = loadConfig(path.join(root, 'etc/farmhand/farmhand.json'));
    expect(cfg.test_pack.url).to.equal('https://git.example.invalid/tests.git');
    expect(cfg.capture.uri).to.equal('v4l2:/dev/video0');
    expect(cfg.runner.run_tests_as).to.equal('farmhand-test');
    const installer = await readFile('scripts/install-appliance.sh', 'utf8');
    expect(installer).to.include('useradd --system --no-create-home --shell /usr/sbin/nologin farmhand-test');
    expect(installer).to.match(/usermod -a -G [a-z,]*farmhand-test farmhand/);
  });
});
