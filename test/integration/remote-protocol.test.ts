/**
 * A whole daemon with `ir.uri roku:http://127.0.0.1:<port>` against an ECP server on loopback (real HTTP):
 * presses through v2 (`POST /api/v2/nodes/{id}/press`) and through a test script's stbt.press / pressing reach
 * the Roku as keypress / keydown + keyup, by the Roku's key names; an unknown key is a 400 and a Roku whose
 * "Control by mobile apps" is off a 503 naming the setting. The test pack's remote file names the remote only:
 * its (empty) code list is never read for these presses.
 */
import { expect } from 'chai';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { startFakeEcp, type FakeEcp } from '../unit/roku-ecp-server.js';

const PACK = {
  'config/stbt.conf': '[test_pack]\ndefault_remote_control = roku\n',
  'config/remote-control/roku.lircd.conf': 'begin remote\n  name roku\nend remote\n',
  'tests/test_roku.py': [
    'import stbt',
    '',
    'def test_presses():',
    '    stbt.press("KEY_OK")',
    '    stbt.press("Home")',
    '    stbt.press("KEY_RIGHT", hold_secs=0.2)',
    '    with stbt.pressing("KEY_FASTFORWARD"):',
    '        pass',
    '',
  ].join('\n'),
};

describe('ir.uri roku: through the daemon (ECP server on loopback)', function () {
  this.timeout(120_000);
  let ecp: FakeEcp;
  let d: TestDaemon;

  before(async () => {
    ecp = await startFakeEcp();
    d = await startTestDaemon({ files: PACK, config: { ir: { uri: `roku:${ecp.url}` } } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
    await ecp?.close();
  });
  beforeEach(() => {
    ecp.mode = 'ok';
    ecp.requests.length = 0;
  });

  it('v2 press: KEY_OK is POST /keypress/Select; an unknown key is 400; a 403 is 503 naming the setting', async () => {
    const as = await asUser(d, 'carol');
    const res = await as.post(`/api/v2/nodes/${d.config.node_id}/press`).send({ key: 'KEY_OK' });
    expect(res.status, res.text).to.equal(204);
    expect(ecp.requests).to.deep.equal([{ method: 'POST', path: '/keypress/Select' }]);
    expectError(await as.post(`/api/v2/nodes/${d.config.node_id}/press`).send({ key: 'KEY_NOSUCH' }), 400, 'invalid_request');
    ecp.mode = 'forbidden';
    const refused = await as.post(`/api/v2/nodes/${d.config.node_id}/press`).send({ key: 'KEY_UP' });
    expectError(refused, 503, 'device_unavailable');
    expect((refused.body as { message: string }).message).to.match(/Control by mobile apps/);
  });

  it('a test script\'s stbt.press and stbt.pressing reach the Roku by its key names', async () => {
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/test_roku.py::test_presses'] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 90_000);
    const [result] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<Record<string, string>>;
    expect(result!.result, result!.failure_reason).to.equal('pass');
    expect(ecp.requests.map((r) => `${r.method} ${r.path}`)).to.deep.equal([
      'POST /keypress/Select',
      'POST /keypress/Home',
      'POST /keydown/Right',
      'POST /keyup/Right',
      'POST /keydown/Fwd',
      'POST /keyup/Fwd',
    ]);
    const log = (await d.http.get(`/api/v1/result${result!.result_id}/farmhand.log`)).text;
    expect(log).to.match(new RegExp(`press KEY_OK remote=roku transport=roku:${ecp.url.replace(/[.]/g, '\\.')}`));
  });
});
