/**
 * The virtual set-top box's remote: the committed vstb.lircd.conf is the one
 * in the source, every key survives LircEncoder -> decoder, repeats and
 * foreign trains are handled as documented, and presses sent through a
 * VirtualTransport reach the box's state.
 */
import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { LircEncoder, parseLircConfig } from '../../src/hardware/ir/lirc/index.js';
import { VirtualTransport } from '../../src/hardware/ir/transports/virtual.js';
import { silentLogger } from '../../src/logger.js';
import {
  createVirtualStb,
  KeyReceiver,
  RemoteDecoder,
  VSTB_LIRCD_CONF,
  VSTB_REMOTE_FILE,
  VSTB_REMOTE_NAME,
  vstbRemote,
} from '../../src/hardware/virtual/index.js';
import { projectRoot } from '../../src/version.js';

const REQUIRED_KEYS = ['KEY_UP', 'KEY_DOWN', 'KEY_LEFT', 'KEY_RIGHT', 'KEY_OK', 'KEY_BACK', 'KEY_MENU', 'KEY_POWER', 'KEY_INFO', 'KEY_CHANNELUP', 'KEY_CHANNELDOWN'];

/** A logger that keeps the messages of warn and debug calls. */
function recordingLogger(lines: string[]) {
  const log = {
    ...silentLogger,
    debug: (_o: object | string, msg?: string) => void lines.push(`debug ${msg ?? ''}`),
    warn: (_o: object | string, msg?: string) => void lines.push(`warn ${msg ?? ''}`),
    child: () => log,
  };
  return log;
}

describe('virtual set-top box: remote control', () => {
  const remote = vstbRemote();

  it('the example pack\'s vstb.lircd.conf is exactly the source\'s VSTB_LIRCD_CONF', async () => {
    const file = await readFile(path.join(projectRoot, 'examples', 'test-pack', VSTB_REMOTE_FILE), 'utf8');
    expect(file).to.equal(VSTB_LIRCD_CONF);
  });

  it('is one NEC-style SPACE_ENC remote named vstb with the navigation keys and KEY_0..KEY_9', () => {
    const remotes = parseLircConfig(VSTB_LIRCD_CONF, 'vstb.lircd.conf');
    expect(remotes).to.have.length(1);
    expect(remote.name).to.equal(VSTB_REMOTE_NAME);
    expect(remote.header).to.deep.equal({ pulse: 9000, space: 4500 });
    const names = remote.codes.map((c) => c.name);
    expect(names).to.include.members([...REQUIRED_KEYS, ...Array.from({ length: 10 }, (_, d) => `KEY_${d}`)]);
    expect(new Set(remote.codes.map((c) => c.codes[0])).size, 'codes are distinct').to.equal(names.length);
  });

  it('every key: encoded by LircEncoder (sendOnce and simsend) decodes to the same key', () => {
    const decoder = new RemoteDecoder(remote);
    for (const { name } of remote.codes) {
      const once = new LircEncoder(remote).sendOnce(name);
      expect(once, name).to.have.length(1);
      expect(decoder.decode(once[0]!), name).to.deep.equal({ kind: 'key', key: name });
      const sim = new LircEncoder(remote).simsend(name, 1);
      expect(decoder.decode(sim[0]!), name).to.deep.equal({ kind: 'key', key: name });
    }
  });

  it('decodes within LIRC\'s tolerance (a transport\'s 21.33 us rounding) and not outside it', () => {
    const decoder = new RemoteDecoder(remote);
    const [train] = new LircEncoder(remote).sendOnce('KEY_OK');
    const rounded = train!.durations.map((d) => Math.round(d / 21.333) * 21.333);
    expect(decoder.decode({ ...train!, durations: rounded })).to.deep.equal({ kind: 'key', key: 'KEY_OK' });
    const stretched = train!.durations.map((d) => d * 1.6);
    expect(decoder.decode({ ...train!, durations: stretched })).to.deep.equal({ kind: 'unknown' });
  });

  it('the NEC repeat code decodes as a repeat; a train of another remote as unknown', () => {
    const decoder = new RemoteDecoder(remote);
    const [, repeat] = new LircEncoder(remote).sendOnce('KEY_UP', 1);
    expect(decoder.decode(repeat!)).to.deep.equal({ kind: 'repeat' });
    const other = parseLircConfig(VSTB_LIRCD_CONF.replace(/^ *pre_data +0x46B9$/m, 'pre_data 0x20DF').replace('name  vstb', 'name  tv'), 'tv.conf')[0]!;
    expect(decoder.decode(new LircEncoder(other).sendOnce('KEY_UP')[0]!)).to.deep.equal({ kind: 'unknown' });
  });

  it('one send is one press: a held key\'s repeats press nothing more; a send starting with a repeat presses the last key again', () => {
    const lines: string[] = [];
    const rx = new KeyReceiver(new RemoteDecoder(remote), recordingLogger(lines));
    const enc = new LircEncoder(remote);
    const [, repeat] = new LircEncoder(remote).sendOnce('KEY_UP', 1);
    expect(rx.receive([repeat!]), 'a repeat before any key').to.equal(undefined);
    expect(rx.receive(enc.sendOnce('KEY_DOWN', 4))).to.equal('KEY_DOWN');
    // irsimsend-style encoding sends a second press of the same key as a repeat frame.
    const sim = new LircEncoder(remote);
    sim.simsend('KEY_DOWN');
    const second = sim.simsend('KEY_DOWN');
    expect(rx.receive(second)).to.equal('KEY_DOWN');
    expect(rx.receive([])).to.equal(undefined);
    expect(lines.filter((l) => l.includes('not understood'))).to.have.length(2);
  });

  it('warns when the sender\'s label names another key of this remote than the one decoded', () => {
    const lines: string[] = [];
    const rx = new KeyReceiver(new RemoteDecoder(remote), recordingLogger(lines));
    const trains = new LircEncoder(remote).sendOnce('KEY_OK');
    expect(rx.receive(trains, { remote: 'vstb', key: 'KEY_OK' })).to.equal('KEY_OK');
    expect(rx.receive(trains, { remote: 'other', key: 'KEY_BACK' })).to.equal('KEY_OK');
    expect(lines.filter((l) => l.startsWith('warn'))).to.deep.equal([]);
    expect(rx.receive(trains, { remote: 'vstb', key: 'KEY_BACK' })).to.equal('KEY_OK');
    expect(lines.filter((l) => l.startsWith('warn'))).to.have.length(1);
  });

  it('presses sent through a VirtualTransport reach the box: DOWN, DOWN, OK opens Recordings', async () => {
    const stb = createVirtualStb({ width: 64, height: 36, fps: 1 });
    const transport = new VirtualTransport(stb.transportListener);
    try {
      const enc = new LircEncoder(remote);
      for (const key of ['KEY_DOWN', 'KEY_DOWN', 'KEY_OK']) await transport.send(enc.sendOnce(key), { key: { remote: 'vstb', key } });
      expect([stb.state().page, stb.state().homeFocus]).to.deep.equal(['recordings', 2]);
      await transport.send(enc.sendOnce('KEY_BACK'));
      expect(stb.state().page).to.equal('home');
    } finally {
      stb.stop();
      await transport.close();
    }
  });
});
