import { expect } from 'chai';
import { parseIniConfig } from '../../src/runner/iniConfig.js';

describe('runner: test-pack INI configuration', () => {
  it('reads sections of string values; keys are written section.key', () => {
    const cfg = parseIniConfig('# comment\n; other comment\n[test_pack]\ndefault_remote_control = vstb\ntest_timeout_secs=600\n\n[global]\nverbose = 1\n');
    expect({ ...cfg.test_pack }).to.deep.equal({ default_remote_control: 'vstb', test_timeout_secs: '600' });
    expect(cfg.global?.verbose).to.equal('1');
  });

  it('keeps true, false and null as the strings written in the file ("all values strings")', () => {
    const cfg = parseIniConfig('[s]\na = true\nb = false\nc = null\nd = "quoted"\n');
    expect({ ...cfg.s }).to.deep.equal({ a: 'true', b: 'false', c: 'null', d: 'quoted' });
  });

  it('does not nest dotted section names: [result.tags] stays one section', () => {
    const cfg = parseIniConfig('[device_under_test]\ntype = stb\n[device_under_test.hdmi]\ninput = 2\n[a.b.c]\nk = v\n');
    expect(cfg['device_under_test']?.type).to.equal('stb');
    expect(cfg['device_under_test.hdmi']?.input).to.equal('2');
    expect(cfg['a.b.c']?.k).to.equal('v');
    expect(cfg['device_under_test']).to.not.have.property('hdmi');
  });

  it('drops keys outside any section and takes the last value of a key[] list', () => {
    const cfg = parseIniConfig('stray = 1\n[s]\nk[] = a\nk[] = b\n');
    expect(Object.keys(cfg)).to.deep.equal(['s']);
    expect(cfg.s?.k).to.equal('b');
  });

  it('an empty or section-less file is {}', () => {
    expect(parseIniConfig('')).to.deep.equal({});
    expect(parseIniConfig('just text\n')).to.deep.equal({});
  });
});
