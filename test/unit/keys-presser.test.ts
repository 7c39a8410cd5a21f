// KeyPresser against a real git test pack (GitTestPack over a bare repository
// made by makeTestPack) and recording transports: what reaches the transport
// must be exactly what a fresh LircEncoder gives for the same presses.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chooseRemote } from '../../src/core/remoteControl.js';
import { KeyPresser, repeatsFor } from '../../src/hardware/ir/keys.js';
import { LircEncoder, parseLircConfig, type IrTrain } from '../../src/hardware/ir/lirc/index.js';
import { NoTransport, VirtualTransport, type VirtualIrEvent } from '../../src/hardware/ir/transports/index.js';
import type { IrTransport, SendKeyOptions } from '../../src/hardware/ir/transports/types.js';
import { GitTestPack } from '../../src/runner/gitTestPack.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { necRemote } from '../fixtures/remotes.js';
import { farmRejection } from '../helpers/rejections.js';

const NEC_REMOTE = necRemote('hallbox', 0x40bf, { KEY_OK: 0x12ed, KEY_UP: 0x32cd });

/** A remote with a toggle bit (RC5 style), so consecutive presses differ. */
const TOGGLE_REMOTE = `begin remote
  name  togglebox
  bits           13
  flags RC5|CONST_LENGTH
  one           889   889
  zero          889   889
  plead         889
  gap        113792
  toggle_bit_mask 0x800
  begin codes
    KEY_OK       0x1157
    KEY_MENU     0x1152
  end codes
end remote
`;

const FILES = {
  'config/stbt.conf': '[test_pack]\ndefault_remote_control = hallbox\n',
  'config/remote-control/hallbox.lircd.conf': NEC_REMOTE,
  'config/remote-control/togglebox.lircd.conf': TOGGLE_REMOTE,
  'tests/x.py': 'def test_x():\n    pass\n',
};

const reference = (text: string) => new LircEncoder(parseLircConfig(text, 'ref.lircd.conf')[0]!);
const totalUs = (ts: readonly IrTrain[]) => ts.reduce((s, t) => s + t.durations.reduce((a, b) => a + b, 0) + t.gap, 0);


/** A transport that encodes keys itself, like lircd: records sendKey calls. */
class KeyNameTransport implements IrTransport {
  readonly uri = 'test-keys:';
  readonly keys: { remote: string; key: string; repeats: number }[] = [];
  sent = 0;
  async send(): Promise<void> {
    this.sent++;
  }
  async sendKey(remote: string, key: string, opts: SendKeyOptions = {}): Promise<void> {
    this.keys.push({ remote, key, repeats: opts.repeats ?? 0 });
  }
  async close(): Promise<void> {}
}

describe('KeyPresser (real git test pack, recording transport)', () => {
  let pack: TestPackRepo;
  let data: string;
  let tp: GitTestPack;
  let events: VirtualIrEvent[];
  let presser: KeyPresser;
  let sha: string;

  before(async () => {
    pack = await makeTestPack(FILES);
    sha = pack.sha;
    data = await mkdtemp(path.join(tmpdir(), 'farmhand-keys-'));
    tp = new GitTestPack({ url: pack.dir, dir: path.join(data, 'tp.git'), worktreesDir: path.join(data, 'checkouts') });
    await tp.open();
  });
  after(async () => {
    await pack.cleanup();
    await rm(data, { recursive: true, force: true });
  });
  beforeEach(() => {
    events = [];
    presser = new KeyPresser({ testPack: tp, transport: new VirtualTransport((e) => events.push(e)) });
  });

  it('sends the trains LircEncoder.sendOnce gives for the key, labelled with remote and key', async () => {
    await presser.press('KEY_OK', { remote: 'hallbox', testPackSha: sha });
    expect(events).to.have.length(1);
    expect(events[0]!.trains).to.deep.equal(reference(NEC_REMOTE).sendOnce('KEY_OK'));
    expect(events[0]!.key).to.deep.equal({ remote: 'hallbox', key: 'KEY_OK' });
    // 9000/4500 header, then pre_data 0x40BF most significant bit first: 0 1 0 0 ...
    expect(events[0]!.trains[0]!.durations.slice(0, 6)).to.deep.equal([9000, 4500, 560, 560, 560, 1690]);
  });

  it('matches key names case-insensitively, as LIRC does', async () => {
    await presser.press('key_up', { remote: 'hallbox', testPackSha: sha });
    expect(events[0]!.trains).to.deep.equal(reference(NEC_REMOTE).sendOnce('KEY_UP'));
    expect(events[0]!.key?.key).to.equal('KEY_UP');
  });

  it('keeps toggle state across presses: consecutive presses equal one encoder\'s sequence and differ', async () => {
    const ref = reference(TOGGLE_REMOTE);
    for (const key of ['KEY_OK', 'KEY_OK', 'KEY_MENU', 'KEY_OK']) await presser.press(key, { remote: 'togglebox', testPackSha: sha });
    const expected = ['KEY_OK', 'KEY_OK', 'KEY_MENU', 'KEY_OK'].map((k) => ref.sendOnce(k));
    expect(events.map((e) => e.trains)).to.deep.equal(expected);
    expect(events[0]!.trains).to.not.deep.equal(events[1]!.trains);
  });

  it('keeps toggle state across commits while the remote file is unchanged, and starts afresh when it changes', async () => {
    const same = await pack.commit({ 'tests/y.py': 'def test_y():\n    pass\n' });
    const changed = await pack.commit({ 'config/remote-control/togglebox.lircd.conf': TOGGLE_REMOTE.replace('0x1157', '0x1158') });
    await tp.fetch();
    await presser.press('KEY_OK', { remote: 'togglebox', testPackSha: sha });
    await presser.press('KEY_OK', { remote: 'togglebox', testPackSha: same });
    await presser.press('KEY_OK', { remote: 'togglebox', testPackSha: changed });
    const ref = reference(TOGGLE_REMOTE);
    expect(events[0]!.trains).to.deep.equal(ref.sendOnce('KEY_OK'));
    expect(events[1]!.trains).to.deep.equal(ref.sendOnce('KEY_OK'));
    expect(events[2]!.trains).to.deep.equal(reference(TOGGLE_REMOTE.replace('0x1157', '0x1158')).sendOnce('KEY_OK'));
  });

  it('sends presses in the order they were made, even when a later one needs no git read', async () => {
    await presser.press('KEY_UP', { remote: 'hallbox', testPackSha: sha }); // hallbox is now parsed and cached
    await Promise.all([
      presser.press('KEY_OK', { remote: 'togglebox', testPackSha: sha }), // reads its file from git first
      presser.press('KEY_OK', { remote: 'hallbox', testPackSha: sha }),
      presser.press('KEY_UP', { remote: 'hallbox', testPackSha: sha }),
    ]);
    expect(events.map((e) => `${e.key?.remote}:${e.key?.key}`)).to.deep.equal(['hallbox:KEY_UP', 'togglebox:KEY_OK', 'hallbox:KEY_OK', 'hallbox:KEY_UP']);
  });

  it('press and hold: repeat frames until the hold time is covered', async () => {
    await presser.press('KEY_UP', { remote: 'hallbox', testPackSha: sha, holdMs: 1000 });
    const trains = events[0]!.trains;
    const n = repeatsFor(parseLircConfig(NEC_REMOTE, 'x')[0]!, 'KEY_UP', 1000);
    expect(trains).to.deep.equal(reference(NEC_REMOTE).sendOnce('KEY_UP', n));
    // One 108 ms frame then 108 ms repeat frames (9000/2250/560): 1000 ms needs 9 repeats.
    expect(n).to.equal(9);
    expect(trains.slice(1).every((t) => t.durations.join() === '9000,2250,560')).to.equal(true);
    expect(totalUs(trains)).to.be.at.least(1_000_000);
    expect(totalUs(trains) - 108_000).to.be.below(1_000_000);
  });

  it('a hold shorter than one frame is a single press', async () => {
    await presser.press('KEY_OK', { remote: 'hallbox', testPackSha: sha, holdMs: 50 });
    expect(events[0]!.trains).to.have.length(1);
  });

  it('an unknown key is not_found, and nothing is sent', async () => {
    const e = await farmRejection(presser.press('KEY_RED', { remote: 'hallbox', testPackSha: sha }));
    expect(e.code).to.equal('not_found');
    expect(e.message).to.include('KEY_RED');
    expect(events).to.have.length(0);
  });

  it('an unknown remote is invalid_request naming the file it looked for', async () => {
    const e = await farmRejection(presser.press('KEY_OK', { remote: 'nosuch', testPackSha: sha }));
    expect(e.code).to.equal('invalid_request');
    expect(e.message).to.include('config/remote-control/nosuch.lircd.conf');
  });

  it('names that could leave the folder or break a protocol line are invalid_request', async () => {
    for (const [key, remote] of [['KEY_OK', '../hallbox'], ['KEY_OK', ''], ['KEY OK', 'hallbox'], ['', 'hallbox']] as const) {
      expect((await farmRejection(presser.press(key, { remote, testPackSha: sha }))).code).to.equal('invalid_request');
    }
    for (const holdMs of [-1, Number.NaN, 60_001]) {
      expect((await farmRejection(presser.press('KEY_OK', { remote: 'hallbox', testPackSha: sha, holdMs }))).code).to.equal('invalid_request');
    }
  });

  it('a transport that encodes keys itself (lircd) gets remote, key and repeats by name, no trains', async () => {
    const t = new KeyNameTransport();
    const p = new KeyPresser({ testPack: tp, transport: t });
    await p.press('key_ok', { remote: 'hallbox', testPackSha: sha });
    await p.press('KEY_UP', { remote: 'hallbox', testPackSha: sha, holdMs: 1000 });
    expect(t.keys).to.deep.equal([
      { remote: 'hallbox', key: 'KEY_OK', repeats: 0 },
      { remote: 'hallbox', key: 'KEY_UP', repeats: 9 },
    ]);
    expect(t.sent).to.equal(0);
  });

  it('transport errors propagate as they are (device_unavailable)', async () => {
    const p = new KeyPresser({ testPack: tp, transport: new NoTransport() });
    expect((await farmRejection(p.press('KEY_OK', { remote: 'hallbox', testPackSha: sha }))).code).to.equal('device_unavailable');
  });

  it('an aborted signal stops a press before anything is sent', async () => {
    const ac = new AbortController();
    ac.abort(new Error('run ended'));
    let err: unknown;
    await presser.press('KEY_OK', { remote: 'hallbox', testPackSha: sha, signal: ac.signal }).catch((e: unknown) => (err = e));
    expect((err as Error).message).to.equal('run ended');
    expect(events).to.have.length(0);
  });

  describe('chooseRemote, the one rule for runs and presses (core/remoteControl.ts)', () => {
    it('takes the requested remote when the test pack has it', async () => {
      expect(await chooseRemote(tp, sha, 'togglebox', 'v2')).to.equal('togglebox');
    });
    it('falls back to test_pack.default_remote_control', async () => {
      expect(await chooseRemote(tp, sha, null, 'v2')).to.equal('hallbox');
      expect(await chooseRemote(tp, sha, undefined, 'v1')).to.equal('hallbox');
    });
    it('v2: "When omitted, the test-pack configuration key test_pack.default_remote_control must be set"; v1 takes the first file', async () => {
      const bare = await pack.commit({ 'config/stbt.conf': '[test_pack]\n' });
      await tp.fetch();
      expect((await farmRejection(chooseRemote(tp, bare, undefined, 'v2'))).code).to.equal('invalid_request');
      expect(await chooseRemote(tp, bare, undefined, 'v1')).to.equal('hallbox');
    });
    it('a requested remote the test pack lacks is invalid_request', async () => {
      expect((await farmRejection(chooseRemote(tp, sha, 'nosuch', 'v2'))).code).to.equal('invalid_request');
      expect((await farmRejection(chooseRemote(tp, sha, 'nosuch', 'v1'))).code).to.equal('invalid_request');
    });
  });
});
