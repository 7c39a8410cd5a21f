/**
 * `stbt.PDU` through the daemon: with `power.uri: virtual:` a test script
 * switches the virtual set-top box's mains off (its picture goes black) and
 * on again (it boots to a picture), and reads the outlet's state back; each
 * switch is a line of the run's log. With `power.uri: snmp://...` the same
 * requests reach net-snmp's snmpd (an APC PDU emulated on loopback). (The control
 * request itself, and an outlet that is missing or fails: test/integration/control-power.test.ts.)
 */
import { expect } from 'chai';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { startSnmpd, type SnmpPeer } from '../unit/power-peers.js';

const PACK = {
  'tests/test_power.py': [
    'import stbt',
    '',
    'def test_power_cycle():',
    '    pdu = stbt.PDU()',
    '    assert pdu.get() is True',
    '    pdu.power_off()',
    '    assert pdu.get() is False',
    '    assert stbt.wait_until(stbt.is_screen_black, timeout_secs=30), "the picture did not go black"',
    '    pdu.set(True)',
    '    assert pdu.get() is True',
    '    assert stbt.wait_until(lambda: not stbt.is_screen_black(), timeout_secs=30), "no picture after power on"',
    '    pdu.power_cycle(off_secs=0)',
    '    assert pdu.get() is True',
    '    assert stbt.wait_until(lambda: not stbt.is_screen_black(), timeout_secs=30), "no picture after the power-cycle"',
    '',
  ].join('\n'),
};

describe('stbt.PDU through the daemon (power.uri virtual:)', function () {
  this.timeout(200_000);
  let d: TestDaemon;

  before(async () => {
    d = await startTestDaemon({ files: PACK, config: { capture: { uri: 'virtual:', fps: 25, preview_fps: 5 }, ir: { uri: 'virtual:' }, power: { uri: 'virtual:' } } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
  });

  it('a test switches the outlet off (no picture), on (a picture again) and power-cycles it, and the run log shows each', async () => {
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/test_power.py::test_power_cycle'] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 180_000);
    const [result] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    expect(result!.result, result!.failure_reason).to.equal('pass');
    const log = (await d.http.get(`/api/v1/result${result!.result_id}/farmhand.log`)).text;
    const off = log.search(/^\S+ power off outlet=virtual:/m);
    const on = log.search(/^\S+ power on outlet=virtual:/m);
    expect(off, log).to.be.greaterThan(-1);
    expect(on, log).to.be.greaterThan(off);
    expect(log.search(/^\S+ power cycle \(off 0 s\) outlet=virtual:/m), log).to.be.greaterThan(on);
  });
});

describe('stbt.PDU through the daemon (power.uri snmp:// to net-snmp\'s snmpd)', function () {
  this.timeout(200_000);
  let d: TestDaemon;
  let agent: SnmpPeer;
  const SNMP_PACK = {
    'tests/test_snmp.py': [
      'import stbt',
      '',
      'def test_snmp_outlet():',
      '    pdu = stbt.PDU()',
      '    pdu.power_off()',
      '    assert pdu.get() is False',
      '    pdu.power_cycle(off_secs=0)',
      '    assert pdu.get() is True',
      '',
      'def test_named_outlet():',
      '    router = stbt.PDU("router")',
      '    router.power_off()',
      '    assert router.get() is False',
      '    assert stbt.PDU().get() is True',
      '    try:',
      '        stbt.PDU("lamp").get()',
      '    except Exception as e:',
      '        assert "router" in str(e), str(e)',
      '    else:',
      '        raise AssertionError("an unknown outlet was not refused")',
      '',
    ].join('\n'),
  };

  before(async () => {
    agent = await startSnmpd('lab-rw');
    d = await startTestDaemon({ files: SNMP_PACK, config: { capture: { uri: 'testsrc:', fps: 5, preview_fps: 1 }, power: { uri: `snmp://lab-rw@127.0.0.1:${agent.port}/2?timeout=2`, outlets: { router: `snmp://lab-rw@127.0.0.1:${agent.port}/3?timeout=2` } } },
    });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
    await agent?.stop();
  });

  it('a test switches outlet 2 off and cycles it through the PDU; the log shows the URI without the community', async () => {
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/test_snmp.py::test_snmp_outlet'] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 180_000);
    const [result] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    expect(result!.result, result!.failure_reason).to.equal('pass');
    const oid = '.1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.2';
    expect(await agent.sets()).to.deep.equal([`${oid} 2`, `${oid} 2`, `${oid} 1`]);
    const log = (await d.http.get(`/api/v1/result${result!.result_id}/farmhand.log`)).text;
    expect(log).to.match(new RegExp(`power cycle \\(off 0 s\\) outlet=snmp://\\*\\*\\*@127\\.0\\.0\\.1:${agent.port}/2\\?timeout=2`));
    expect(log).not.to.contain('lab-rw');
  });

  it('stbt.PDU("router") switches the outlet named in power.outlets (outlet 3), not the device\'s (outlet 2)', async () => {
    const before = (await agent.sets()).length;
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/test_snmp.py::test_named_outlet'] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 180_000);
    const [result] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    expect(result!.result, result!.failure_reason).to.equal('pass');
    expect((await agent.sets()).slice(before)).to.deep.equal(['.1.3.6.1.4.1.318.1.1.12.3.3.1.1.4.3 2']);
    const log = (await d.http.get(`/api/v1/result${result!.result_id}/farmhand.log`)).text;
    expect(log).to.match(new RegExp(`power off outlet=snmp://\\*\\*\\*@127\\.0\\.0\\.1:${agent.port}/3\\?timeout=2`));
  });
});
