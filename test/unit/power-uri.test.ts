/**
 * power.uri's grammar (src/config/uris/power.ts): each form parses to what the drivers use, every
 * bad URI is refused when the configuration loads with what to write instead, and the
 * credentials are masked wherever the URI is shown. Also the per-PDU queue on its own.
 */
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { parsePowerUri, redactPowerUri } from '../../src/config/uris/power.js';
import { busyPdus, serialised } from '../../src/hardware/power/serialise.js';

describe('power.uri grammar', () => {
  it('parses each form with its defaults', () => {
    expect(parsePowerUri('none')).to.deep.equal({ family: 'none' });
    expect(parsePowerUri('virtual:')).to.deep.equal({ family: 'virtual' });
    expect(parsePowerUri('snmp://pdu.lab/3')).to.deep.include({ family: 'snmp', host: 'pdu.lab', port: 161, outlet: 3, user: 'private', timeoutMs: 5000, offSecs: 5 });
    expect(parsePowerUri('snmp://pub@[::1]:1161/8?mib=apc-spdu&version=2c&timeout=1.5&off_secs=0')).to.deep.include({ host: '::1', port: 1161, outlet: 8, user: 'pub', timeoutMs: 1500, offSecs: 0, options: { mib: 'apc-spdu', version: '2c', timeout: '1.5', off_secs: '0' } });
    expect(parsePowerUri('netio+https://netio:p%40ss@10.0.0.9/4')).to.deep.include({ family: 'netio', protocol: 'https:', port: 443, user: 'netio', password: 'p@ss', outlet: 4 });
    expect(parsePowerUri('shelly+http://plug/0')).to.deep.include({ family: 'shelly', port: 80, outlet: 0 });
    expect(parsePowerUri('tasmota+http://sonoff:8080/1')).to.deep.include({ family: 'tasmota', port: 8080, outlet: 1 });
    expect(parsePowerUri('aviosys+http://admin:12345678@ip9258/2?base=60')).to.deep.include({ family: 'aviosys', outlet: 2, options: { base: '60' } });
  });

  it('refuses what it cannot use, saying what to write', () => {
    const bad: Array<[string, RegExp]> = [
      ['off', /unknown URI scheme; use one of: none, virtual:/],
      ['snmp://pdu', /outlet number as its path/],
      ['snmp://pdu/0', /count from 1/],
      ['snmp://a:b@pdu/1', /community before "@", no password/],
      ['snmp+http://pdu/1', /takes no \+http/],
      ['netio://pdu/1', /write netio\+http:\/\/ or netio\+https:\/\//],
      ['netio+http://pdu/x', /outlet number/],
      ['snmp://pdu/1?mib=cisco', /mib=cisco is not one of/],
      ['shelly+http://plug/0?mib=apc-rpdu', /option "mib" is not known for shelly/],
      ['tasmota+http://plug/1?timeout=0', /timeout=0 must be a number of seconds above 0/],
      ['tasmota+http://plug/1?off_secs=9999', /off_secs=9999 .* at most 600/],
      ['shelly2+http://admin:pw@plug/0', /digest authentication/],
    ];
    for (const [uri, why] of bad) expect(() => parsePowerUri(uri), uri).to.throw(why);
  });

  it('masks the credentials wherever the URI is shown', () => {
    expect(redactPowerUri('netio+http://user:secret@pdu/1')).to.equal('netio+http://***@pdu/1');
    expect(redactPowerUri('snmp://community@pdu/1?version=2c')).to.equal('snmp://***@pdu/1?version=2c');
    expect(redactPowerUri('shelly+http://plug/0')).to.equal('shelly+http://plug/0');
  });

  it('a bad power.uri stops the configuration from loading, with the reason and no password', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'farmhand-power-uri-'));
    try {
      const f = path.join(dir, 'farmhand.json');
      await writeFile(f, JSON.stringify({ test_pack: { url: 'https://example.invalid/tp.git' }, power: { uri: 'netio+http://u:hunter2@pdu/x' } }));
      let err: ConfigError | undefined;
      try {
        loadConfig(f);
      } catch (e) {
        err = e as ConfigError;
      }
      expect(err).to.be.instanceOf(ConfigError);
      expect(err!.message).to.contain('power.uri').and.contain('outlet number').and.not.contain('hunter2');
      await writeFile(f, JSON.stringify({ test_pack: { url: 'https://example.invalid/tp.git' }, power: { uri: 'snmp://pdu/2' } }));
      expect(loadConfig(f).power.uri).to.equal('snmp://pdu/2');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('power: one queue per PDU (serialise.ts)', () => {
  it('runs one PDU\'s requests one at a time in order, past a failure; another PDU\'s run alongside', async () => {
    const log: string[] = [];
    let running = 0;
    let most = 0;
    const step = (name: string, fail = false) => async () => {
      running += 1;
      most = Math.max(most, running);
      log.push(`start ${name}`);
      await new Promise((r) => setImmediate(r));
      log.push(`end ${name}`);
      running -= 1;
      if (fail) throw new Error(name);
      return name;
    };
    const other: string[] = [];
    const results = await Promise.allSettled([
      serialised('pdu:1', step('a')),
      serialised('pdu:1', step('b', true)),
      serialised('pdu:1', step('c')),
      serialised('pdu:2', async () => {
        other.push(`while ${log.length}`);
        return 'x';
      }),
    ]);
    expect(results.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(log).to.deep.equal(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    expect(most).to.equal(1);
    expect(other[0]).not.to.equal(`while ${log.length}`); // ran before pdu:1's queue was done
    await new Promise((r) => setImmediate(r)); // the queues' bookkeeping settles after their last request
    expect(busyPdus()).to.equal(0);
  });
});
