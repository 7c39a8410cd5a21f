// The key maps of the CEC, Roku and ADB transports: every farmhand name maps to a name the protocol has, native
// names pass, unknown ones are refused with invalid_request; the config's ir.uri grammar takes the new URIs.
import { expect } from 'chai';
import { KeyCodes } from '@devicefarmer/adbkit';
import { configSchema } from '../../src/config/schema.js';
import {
  ADB_KEYS, CEC_KEYS, CEC_POWER_ON, CEC_STANDBY, CEC_UI_COMMANDS, ROKU_KEYS, ROKU_KEY_NAMES, androidKeyCode, resolveKey,
} from '../../src/hardware/ir/transports/keymaps.js';

const FARMHAND = ['KEY_OK', 'KEY_UP', 'KEY_DOWN', 'KEY_LEFT', 'KEY_RIGHT', 'KEY_BACK', 'KEY_HOME', 'KEY_MENU', 'KEY_POWER', 'KEY_0', 'KEY_9', 'KEY_VOLUMEUP', 'KEY_MUTE', 'KEY_PLAY', 'KEY_REWIND', 'KEY_FASTFORWARD', 'KEY_INFO', 'KEY_CHANNELUP', 'KEY_POWERON', 'KEY_STANDBY'];

/** The farmhand names a map knows: every KEY_* it answers among a wide list. */
function farmhandNames(map: typeof CEC_KEYS): string[] {
  const candidates = new Set<string>(FARMHAND);
  for (const k of ['SELECT', 'ENTER', 'EXIT', 'SETUP', 'CONFIG', 'FAVORITES', 'CONTEXT_MENU', 'DOT', 'CLEAR', 'CHANNELDOWN', 'LAST', 'HELP', 'PAGEUP', 'PAGEDOWN', 'VOLUMEDOWN', 'STOP', 'PAUSE', 'PLAYPAUSE', 'RECORD', 'EJECTCD', 'NEXT', 'PREVIOUS', 'SUBTITLE', 'EPG', 'PROGRAM', 'BLUE', 'RED', 'GREEN', 'YELLOW', 'SOUND', 'AUDIO', 'VIDEO', 'WAKEUP', 'POWEROFF', 'SLEEP', 'OPTION', 'AGAIN', 'REPLAY', 'SEARCH', 'BACKSPACE', 'FIND', 'TUNER', 'SPACE', 'SETTINGS', 'DELETE', 'TAB', 'ESC', 'TV', 'DVR', 'A', 'Z', '5']) candidates.add(`KEY_${k}`);
  return [...candidates].filter((k) => map.lookup(k) !== undefined);
}

describe('key maps of the CEC, Roku and ADB transports', () => {
  it('the common keys exist in all three', () => {
    for (const map of [CEC_KEYS, ROKU_KEYS, ADB_KEYS]) for (const k of ['KEY_OK', 'KEY_UP', 'KEY_DOWN', 'KEY_LEFT', 'KEY_RIGHT', 'KEY_BACK', 'KEY_HOME', 'KEY_POWER', 'KEY_VOLUMEUP']) {
      expect(map.lookup(k), `${map.protocol} ${k}`).to.be.a('string');
    }
  });

  it('every farmhand name maps to a name the protocol has', () => {
    const cec = new Set([...CEC_UI_COMMANDS, CEC_STANDBY, CEC_POWER_ON]);
    for (const k of farmhandNames(CEC_KEYS)) expect(cec.has(CEC_KEYS.lookup(k)!), k).to.equal(true);
    const roku = new Set(ROKU_KEY_NAMES);
    for (const k of farmhandNames(ROKU_KEYS)) expect(roku.has(ROKU_KEYS.lookup(k)!) || /^Lit_/.test(ROKU_KEYS.lookup(k)!), k).to.equal(true);
    for (const k of farmhandNames(ADB_KEYS)) expect(androidKeyCode(ADB_KEYS.lookup(k)!), k).to.be.above(0);
    expect(farmhandNames(CEC_KEYS).length).to.be.above(40);
  });

  it('native names pass (any case); Android names become adbkit\'s numbers', () => {
    expect(CEC_KEYS.lookup('F1-Blue')).to.equal('f1-blue');
    expect(ROKU_KEYS.lookup('inputhdmi2')).to.equal('InputHDMI2');
    expect(ROKU_KEYS.lookup('Lit_%20')).to.equal('Lit_%20');
    expect(ADB_KEYS.lookup('keycode_tv_input')).to.equal('KEYCODE_TV_INPUT');
    expect(androidKeyCode('KEYCODE_DPAD_CENTER')).to.equal(KeyCodes.KEYCODE_DPAD_CENTER);
    expect(androidKeyCode(ADB_KEYS.lookup('KEY_OK')!)).to.equal(23);
  });

  it('unknown keys are invalid_request naming the protocol and the docs', () => {
    for (const [map, key] of [[CEC_KEYS, 'KEY_A'], [ROKU_KEYS, 'KEY_RED'], [ADB_KEYS, 'KEY_AGAIN'], [ADB_KEYS, 'KEYCODE_UNKNOWN'], [ROKU_KEYS, 'toString'], [CEC_KEYS, 'KEY_constructor']] as const) {
      let err: unknown;
      try {
        resolveKey(map, key);
      } catch (e) {
        err = e;
      }
      expect(err, `${map.protocol} ${key}`).to.include({ code: 'invalid_request' });
      expect((err as Error).message).to.contain(map.protocol).and.contain('docs/remotes.md');
    }
  });

  it('the config takes cec:, roku: and adb: URIs and refuses malformed ones', () => {
    const parse = (uri: string) => configSchema.safeParse({ test_pack: { url: '/x' }, ir: { uri } }).success;
    for (const ok of ['cec:', 'cec:/dev/cec0', 'cec:/dev/cec1?to=0', 'roku:http://192.168.1.5:8060', 'roku:http://roku.lan', 'adb:emulator-5554', 'adb:192.168.1.20:5555']) expect(parse(ok), ok).to.equal(true);
    for (const bad of ['cec:cec0', 'cec:/dev/cec0?x=1', 'roku:192.168.1.5', 'roku:https://x', 'roku:http://x/p', 'adb:', 'adb:a b', 'adb:a;b']) expect(parse(bad), bad).to.equal(false);
  });
});
