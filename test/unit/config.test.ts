import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, EX_CONFIG, loadConfig } from '../../src/config/load.js';

const run = promisify(execFile);

describe('configuration', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-config-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const write = async (name: string, obj: unknown) => {
    const f = path.join(dir, name);
    await writeFile(f, typeof obj === 'string' ? obj : JSON.stringify(obj));
    return f;
  };

  it('fills every default from a minimal file', async () => {
    const cfg = loadConfig(await write('min.json', { test_pack: { url: 'https://example.invalid/tp.git' } }));
    expect(cfg.listen).to.equal('0.0.0.0:8080');
    expect(cfg.data_dir).to.equal('/var/lib/farmhand');
    expect(cfg.runner.python).to.equal('/usr/bin/python3');
    expect(cfg.capture).to.deep.include({ uri: 'testsrc:', width: 1280, height: 720, fps: 25 });
    expect(cfg.retention.max_results).to.equal(100_000);
    expect(cfg.auth.v1_requires_token).to.equal(false);
    expect(cfg.node_id).to.match(/^farmhand-[0-9a-f]{12}$/);
  });

  it('lets command-line flags override the file, and resolves relative paths against the file', async () => {
    const f = await write('rel.json', { test_pack: { url: 'tp' }, data_dir: 'data' });
    expect(loadConfig(f).test_pack.url).to.equal(path.join(dir, 'tp'));
    expect(loadConfig(f).data_dir).to.equal(path.join(dir, 'data'));
    const cfg = loadConfig(f, { listen: '127.0.0.1:0', node_id: 'bench-1', capture: 'none:', data_dir: '/tmp/x' });
    expect(cfg).to.deep.include({ listen: '127.0.0.1:0', node_id: 'bench-1', data_dir: '/tmp/x' });
    expect(cfg.capture.uri).to.equal('none:');
  });

  it('lists every problem as path: message', async () => {
    const f = await write('bad.json', { listen: 'nowhere', capture: { uri: 'webcam', fps: -1 }, colour: 'blue' });
    try {
      loadConfig(f);
      expect.fail('should have thrown');
    } catch (e) {
      expect(e).to.be.instanceOf(ConfigError);
      const problems = (e as ConfigError).problems.join('\n');
      for (const p of ['listen:', 'capture.uri:', 'capture.fps:', 'test_pack:']) expect(problems).to.include(p);
      expect(problems).to.match(/colour/);
    }
  });

  it('power.outlets: named network PDU outlets; virtual:, none and a bad name or URI are refused, each named', async () => {
    const ok = loadConfig(await write('outlets.json', { test_pack: { url: 'tp' }, power: { outlets: { router: 'snmp://lab@pdu.lab/3', 'usb-hub_2': 'netio+http://pdu.lab/4' } } }));
    expect(ok.power).to.deep.equal({ uri: 'none', outlets: { router: 'snmp://lab@pdu.lab/3', 'usb-hub_2': 'netio+http://pdu.lab/4' } });
    expect(loadConfig(await write('no-outlets.json', { test_pack: { url: 'tp' } })).power.outlets).to.deep.equal({});
    const bad = await write('bad-outlets.json', {
      test_pack: { url: 'tp' },
      power: { outlets: { box: 'virtual:', off: 'none', 'no spaces': 'snmp://pdu.lab/1', pdu: 'snmp://pdu.lab' } },
    });
    try {
      loadConfig(bad);
      expect.fail('should have thrown');
    } catch (e) {
      const problems = (e as ConfigError).problems.join('\n');
      expect(problems).to.match(/power\.outlets\.box: a named outlet is a network PDU's outlet, not "virtual:"/);
      expect(problems).to.match(/power\.outlets\.off: a named outlet is a network PDU's outlet, not "none"/);
      expect(problems).to.match(/power\.outlets\.no spaces: an outlet name is/);
      expect(problems).to.match(/power\.outlets\.pdu: .*outlet number/);
    }
  });

  it('reports a file that is not JSON, or missing', async () => {
    expect(() => loadConfig(path.join(dir, 'absent.json'))).to.throw(ConfigError, /cannot read/);
    expect(() => loadConfig(path.join(dir, 'x.json'), {})).to.throw(ConfigError);
    const f = await write('broken.json', '{"test_pack": ');
    expect(() => loadConfig(f)).to.throw(ConfigError, /not valid JSON/);
  });

  it(`farmhand serve exits with ${EX_CONFIG} (EX_CONFIG) on a bad config, printing every problem`, async () => {
    const f = await write('cli-bad.json', { listen: 'nowhere' });
    const main = path.resolve('src/main.ts');
    const err = await run(process.execPath, ['--import', 'tsx', main, 'serve', '--config', f]).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).to.equal(EX_CONFIG);
    expect(err?.stderr).to.include('listen:').and.include('test_pack:');
  });
});
