/**
 * Nothing slow on a request's path (issue 20, item 2): while the test-pack
 * origin's `git upload-pack` is held (a fetch started by the push hook is
 * blocked inside it), the front door, the live view, a screenshot and a key
 * press are all answered, from what the node already has. A press naming a
 * commit the mirror does not have yet waits for that fetch in its own answer
 * only, and gets it once the origin is let go.
 */
import path from 'node:path';
import { expect } from 'chai';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { holdableOrigin, type HeldOrigin } from '../helpers/heldOrigin.js';
import { waitFor } from '../helpers/wait.js';

describe('test pack: pages, screenshots and presses never wait for git (held origin)', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let origin: HeldOrigin;
  let token: string;

  before(async () => {
    d = await startTestDaemon({
      files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
      // refresh_secs 0: the mirror is always stale, so before the fix every press and page fetched first.
      config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 }, test_pack: { refresh_secs: 0 } },
    });
    token = (await asUser(d, 'alice')).token;
    await waitOnline(d);
    origin = await holdableOrigin(path.join(d.dataDir, 'test-pack.git'));
  });
  after(async () => {
    await origin?.cleanup();
    await d?.stop();
  });

  const get = (p: string) => fetch(`${d.url}${p}`, { headers: { Authorization: `token ${token}` } });
  const press = (body: Record<string, unknown>) =>
    fetch(`${d.url}/api/v2/nodes/${d.config.node_id}/press`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('answers the front door, the live view, a screenshot and a press while a fetch is held; a new commit waits alone', async () => {
    await origin.hold();
    let hookDone = false;
    const hook = fetch(`${d.url}/github/post-receive`, { method: 'POST' }).then((r) => {
      hookDone = true;
      return r;
    });
    await waitFor(async () => (await origin.heldCount()) > 0, { what: 'the hook fetch to be held in upload-pack', timeoutMs: 30_000 });

    // A commit the mirror cannot have: a press naming it needs the fetch, and waits for it.
    const newSha = await d.pack.commit({ 'tests/new.py': 'def test_new():\n    pass\n' });
    let newDone = false;
    const pressNew = press({ key: 'KEY_OK', test_pack_revision: newSha }).then((r) => {
      newDone = true;
      return r;
    });

    const front = await get('/');
    expect(front.status).to.equal(200);
    expect(await front.text()).to.contain('<html');
    const live = await get('/app/live');
    expect(live.status).to.equal(200);
    expect(await live.text()).to.contain('vstb'); // the remote's name, read from memory
    const shot = await get(`/api/v2/nodes/${d.config.node_id}/screenshot.png`);
    expect(shot.status).to.equal(200);
    expect(shot.headers.get('content-type')).to.equal('image/png');
    const pressed = await press({ key: 'KEY_OK' });
    expect(pressed.status, await pressed.text()).to.equal(204);

    // All answered while the origin is still held, and the ones that need the fetch have not been.
    expect(await origin.heldCount()).to.be.greaterThan(0);
    expect(hookDone, 'the hook answered before its fetch could finish').to.equal(false);
    expect(newDone, 'a press naming an unmirrored commit answered without fetching').to.equal(false);

    await origin.release();
    expect((await hook).status).to.equal(204);
    const late = await pressNew;
    expect(late.status, await late.text()).to.equal(204);
  });
});
