/**
 * Key names per control protocol: farmhand's (LIRC's `KEY_*` namespace, as
 * stb-tester test packs and the web remote use them) to HDMI-CEC UI commands
 * (cec-ctl's `ui-cmd` names), Roku ECP key names and Android `KEYCODE_*`
 * codes. Each map also takes the protocol's own names (`select`, `Home`,
 * `KEYCODE_HOME`). The tables are documented in docs/remotes.md.
 */
import { FarmError } from '../../../core/errors.js';
import { KeyCodes } from '@devicefarmer/adbkit';
import type { KeyMap } from './types.js';

/** The protocol's key for `key`, or `invalid_request` naming a few known ones. */
export function resolveKey(map: KeyMap, key: string): string {
  const found = typeof key === 'string' ? map.lookup(key) : undefined;
  if (found === undefined) {
    throw new FarmError(
      'invalid_request',
      `key ${JSON.stringify(key)} has no ${map.protocol} equivalent: use a key such as ${map.examples.join(', ')} (the tables are in docs/remotes.md)`,
    );
  }
  return found;
}

/** Digits KEY_0..KEY_9 and letters KEY_A..KEY_Z, mapped by `f`. */
function digitsAndLetters(f: (c: string) => string, letters = true): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of '0123456789') out[`KEY_${c}`] = f(c);
  if (letters) for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZ') out[`KEY_${c}`] = f(c);
  return out;
}

/** A map from farmhand names (upper-cased) plus a native lookup. */
function keyMap(protocol: string, farmhand: Record<string, string>, native: (key: string) => string | undefined): KeyMap {
  return {
    protocol,
    examples: ['KEY_OK', 'KEY_UP', 'KEY_BACK', 'KEY_POWER'],
    lookup(key: string) {
      const upper = key.toUpperCase();
      if (upper.startsWith('KEY_')) return Object.hasOwn(farmhand, upper) ? farmhand[upper] : undefined;
      return native(key);
    },
  };
}

// ---- HDMI-CEC: User Control Pressed operands, as cec-ctl names them ----

/** CEC UI commands cec-ctl knows by name (CEC 1.4 / 2.0, "User Control Codes"). */
export const CEC_UI_COMMANDS: readonly string[] = [
  'select', 'up', 'down', 'left', 'right', 'right-up', 'right-down', 'left-up', 'left-down', 'device-root-menu',
  'device-setup-menu', 'contents-menu', 'favorite-menu', 'back', 'media-top-menu', 'media-context-sensitive-menu',
  'number-entry-mode', 'number-11', 'number-12', 'number-0-or-number-10', 'number-1', 'number-2', 'number-3',
  'number-4', 'number-5', 'number-6', 'number-7', 'number-8', 'number-9', 'dot', 'enter', 'clear', 'next-favorite',
  'channel-up', 'channel-down', 'previous-channel', 'sound-select', 'input-select', 'display-information', 'help',
  'page-up', 'page-down', 'power', 'volume-up', 'volume-down', 'mute', 'play', 'stop', 'pause', 'record', 'rewind',
  'fast-forward', 'eject', 'skip-forward', 'skip-backward', 'stop-record', 'pause-record', 'angle', 'sub-picture',
  'video-on-demand', 'electronic-program-guide', 'timer-programming', 'initial-configuration', 'select-broadcast-type',
  'select-sound-presentation', 'audio-description', 'internet', '3d-mode', 'play-function', 'pause-play-function',
  'record-function', 'pause-record-function', 'stop-function', 'mute-function', 'restore-volume-function',
  'tune-function', 'select-media-function', 'select-av-input-function', 'select-audio-input-function',
  'power-toggle-function', 'power-off-function', 'power-on-function', 'f1-blue', 'f2-red', 'f3-green', 'f4-yellow',
  'f5', 'data',
];

/**
 * Two keys are not User Control codes but CEC messages of their own: `standby`
 * (<Standby>) and `power-on` (<Image View On> to a TV, the Power On Function
 * UI command to any other device).
 */
export const CEC_STANDBY = 'standby';
export const CEC_POWER_ON = 'power-on';

const CEC_FARMHAND: Record<string, string> = {
  KEY_OK: 'select', KEY_SELECT: 'select', KEY_ENTER: 'enter',
  KEY_UP: 'up', KEY_DOWN: 'down', KEY_LEFT: 'left', KEY_RIGHT: 'right',
  KEY_MENU: 'device-root-menu', KEY_HOME: 'device-root-menu', KEY_SETUP: 'device-setup-menu', KEY_CONFIG: 'device-setup-menu',
  KEY_FAVORITES: 'favorite-menu', KEY_CONTEXT_MENU: 'media-context-sensitive-menu',
  KEY_BACK: 'back', KEY_EXIT: 'back', KEY_DOT: 'dot', KEY_CLEAR: 'clear',
  KEY_CHANNELUP: 'channel-up', KEY_CHANNELDOWN: 'channel-down', KEY_LAST: 'previous-channel',
  KEY_INFO: 'display-information', KEY_HELP: 'help', KEY_PAGEUP: 'page-up', KEY_PAGEDOWN: 'page-down',
  KEY_POWER: 'power', KEY_VOLUMEUP: 'volume-up', KEY_VOLUMEDOWN: 'volume-down', KEY_MUTE: 'mute',
  KEY_PLAY: 'play', KEY_STOP: 'stop', KEY_PAUSE: 'pause', KEY_PLAYPAUSE: 'pause-play-function', KEY_RECORD: 'record',
  KEY_REWIND: 'rewind', KEY_FASTFORWARD: 'fast-forward', KEY_EJECTCD: 'eject', KEY_NEXT: 'skip-forward',
  KEY_PREVIOUS: 'skip-backward', KEY_SUBTITLE: 'sub-picture', KEY_EPG: 'electronic-program-guide',
  KEY_PROGRAM: 'electronic-program-guide', KEY_BLUE: 'f1-blue', KEY_RED: 'f2-red', KEY_GREEN: 'f3-green',
  KEY_YELLOW: 'f4-yellow', KEY_SOUND: 'sound-select', KEY_AUDIO: 'sound-select', KEY_VIDEO: 'input-select',
  KEY_POWERON: CEC_POWER_ON, KEY_WAKEUP: CEC_POWER_ON, KEY_STANDBY: CEC_STANDBY, KEY_POWEROFF: CEC_STANDBY, KEY_SLEEP: CEC_STANDBY,
  ...digitsAndLetters((d) => (d === '0' ? 'number-0-or-number-10' : `number-${d}`), false),
};

const cecNative = new Set([...CEC_UI_COMMANDS, CEC_STANDBY, CEC_POWER_ON]);

export const CEC_KEYS: KeyMap = keyMap('HDMI-CEC', CEC_FARMHAND, (key) => {
  const lower = key.toLowerCase();
  return cecNative.has(lower) ? lower : undefined;
});

// ---- Roku External Control Protocol ----

/** Roku's own key names (ECP "Keypress key values"), matched without regard to case. */
export const ROKU_KEY_NAMES: readonly string[] = [
  'Home', 'Rev', 'Fwd', 'Play', 'Select', 'Left', 'Right', 'Down', 'Up', 'Back', 'InstantReplay', 'Info',
  'Backspace', 'Search', 'Enter', 'FindRemote', 'VolumeDown', 'VolumeMute', 'VolumeUp', 'PowerOff', 'PowerOn',
  'Power', 'ChannelUp', 'ChannelDown', 'InputTuner', 'InputHDMI1', 'InputHDMI2', 'InputHDMI3', 'InputHDMI4',
  'InputAV1',
];

const ROKU_FARMHAND: Record<string, string> = {
  KEY_OK: 'Select', KEY_SELECT: 'Select', KEY_ENTER: 'Enter',
  KEY_UP: 'Up', KEY_DOWN: 'Down', KEY_LEFT: 'Left', KEY_RIGHT: 'Right',
  KEY_HOME: 'Home', KEY_MENU: 'Home', KEY_BACK: 'Back', KEY_EXIT: 'Back',
  KEY_PLAY: 'Play', KEY_PAUSE: 'Play', KEY_PLAYPAUSE: 'Play', KEY_REWIND: 'Rev', KEY_FASTFORWARD: 'Fwd',
  KEY_INFO: 'Info', KEY_OPTION: 'Info', KEY_AGAIN: 'InstantReplay', KEY_REPLAY: 'InstantReplay',
  KEY_SEARCH: 'Search', KEY_BACKSPACE: 'Backspace', KEY_FIND: 'FindRemote',
  KEY_VOLUMEUP: 'VolumeUp', KEY_VOLUMEDOWN: 'VolumeDown', KEY_MUTE: 'VolumeMute',
  KEY_POWER: 'Power', KEY_POWERON: 'PowerOn', KEY_WAKEUP: 'PowerOn', KEY_POWEROFF: 'PowerOff', KEY_STANDBY: 'PowerOff',
  KEY_SLEEP: 'PowerOff', KEY_CHANNELUP: 'ChannelUp', KEY_CHANNELDOWN: 'ChannelDown', KEY_TUNER: 'InputTuner',
  KEY_SPACE: 'Lit_%20',
  ...digitsAndLetters((c) => `Lit_${c.toLowerCase()}`),
};

const rokuByLower = new Map(ROKU_KEY_NAMES.map((k) => [k.toLowerCase(), k]));

/** `Lit_<c>`: one character typed into a text field; sent URL-encoded. */
function rokuLiteral(key: string): string | undefined {
  const m = /^lit_(.+)$/i.exec(key);
  if (!m) return undefined;
  const text = m[1]!;
  const chars = [...(/%[0-9a-f]{2}/i.test(text) ? safeDecode(text) : text)];
  return chars.length === 1 ? `Lit_${encodeURIComponent(chars[0]!)}` : undefined;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export const ROKU_KEYS: KeyMap = keyMap('Roku ECP', ROKU_FARMHAND, (key) => rokuByLower.get(key.toLowerCase()) ?? rokuLiteral(key));

// ---- Android: KEYCODE_* (android.view.KeyEvent) ----

/** Android's key codes by name, from adbkit's table of android.view.KeyEvent (KEYCODE_UNKNOWN left out). */
const KEYCODES = new Map(
  Object.entries(KeyCodes as Record<string, string | number>).filter((e): e is [string, number] => typeof e[1] === 'number' && e[1] > 0),
);

const ADB_FARMHAND: Record<string, string> = {
  KEY_OK: 'KEYCODE_DPAD_CENTER', KEY_SELECT: 'KEYCODE_DPAD_CENTER', KEY_ENTER: 'KEYCODE_ENTER',
  KEY_UP: 'KEYCODE_DPAD_UP', KEY_DOWN: 'KEYCODE_DPAD_DOWN', KEY_LEFT: 'KEYCODE_DPAD_LEFT', KEY_RIGHT: 'KEYCODE_DPAD_RIGHT',
  KEY_HOME: 'KEYCODE_HOME', KEY_MENU: 'KEYCODE_MENU', KEY_BACK: 'KEYCODE_BACK', KEY_EXIT: 'KEYCODE_BACK',
  KEY_POWER: 'KEYCODE_POWER', KEY_SLEEP: 'KEYCODE_SLEEP', KEY_STANDBY: 'KEYCODE_SLEEP', KEY_POWEROFF: 'KEYCODE_SLEEP',
  KEY_WAKEUP: 'KEYCODE_WAKEUP', KEY_POWERON: 'KEYCODE_WAKEUP',
  KEY_VOLUMEUP: 'KEYCODE_VOLUME_UP', KEY_VOLUMEDOWN: 'KEYCODE_VOLUME_DOWN', KEY_MUTE: 'KEYCODE_VOLUME_MUTE',
  KEY_PLAY: 'KEYCODE_MEDIA_PLAY', KEY_PAUSE: 'KEYCODE_MEDIA_PAUSE', KEY_PLAYPAUSE: 'KEYCODE_MEDIA_PLAY_PAUSE',
  KEY_STOP: 'KEYCODE_MEDIA_STOP', KEY_REWIND: 'KEYCODE_MEDIA_REWIND', KEY_FASTFORWARD: 'KEYCODE_MEDIA_FAST_FORWARD',
  KEY_NEXT: 'KEYCODE_MEDIA_NEXT', KEY_PREVIOUS: 'KEYCODE_MEDIA_PREVIOUS', KEY_RECORD: 'KEYCODE_MEDIA_RECORD',
  KEY_CHANNELUP: 'KEYCODE_CHANNEL_UP', KEY_CHANNELDOWN: 'KEYCODE_CHANNEL_DOWN', KEY_LAST: 'KEYCODE_LAST_CHANNEL',
  KEY_INFO: 'KEYCODE_INFO', KEY_EPG: 'KEYCODE_GUIDE', KEY_PROGRAM: 'KEYCODE_GUIDE',
  KEY_RED: 'KEYCODE_PROG_RED', KEY_GREEN: 'KEYCODE_PROG_GREEN', KEY_YELLOW: 'KEYCODE_PROG_YELLOW', KEY_BLUE: 'KEYCODE_PROG_BLUE',
  KEY_SEARCH: 'KEYCODE_SEARCH', KEY_SETTINGS: 'KEYCODE_SETTINGS', KEY_SETUP: 'KEYCODE_SETTINGS',
  KEY_BACKSPACE: 'KEYCODE_DEL', KEY_DELETE: 'KEYCODE_FORWARD_DEL', KEY_TAB: 'KEYCODE_TAB', KEY_SPACE: 'KEYCODE_SPACE',
  KEY_ESC: 'KEYCODE_ESCAPE', KEY_SUBTITLE: 'KEYCODE_CAPTIONS', KEY_TV: 'KEYCODE_TV', KEY_DVR: 'KEYCODE_DVR',
  KEY_PAGEUP: 'KEYCODE_PAGE_UP', KEY_PAGEDOWN: 'KEYCODE_PAGE_DOWN', KEY_EJECTCD: 'KEYCODE_MEDIA_EJECT',
  ...digitsAndLetters((c) => `KEYCODE_${c}`),
};

/** Android names map to themselves; the transport sends the number (`androidKeyCode`). */
export const ADB_KEYS: KeyMap = keyMap('Android', ADB_FARMHAND, (key) => {
  const upper = key.toUpperCase();
  return KEYCODES.has(upper) ? upper : undefined;
});

/** The number `input keyevent` is given for a KEYCODE_ name this map answered. */
export function androidKeyCode(name: string): number {
  const code = KEYCODES.get(name);
  if (code === undefined) throw new FarmError('invalid_request', `${name} is not an Android key code`);
  return code;
}
