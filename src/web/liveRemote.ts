/**
 * The web remote's model: the test pack's remotes (`config/remote-control/
 * <name>.lircd.conf`) with their key names, read at the revision a manual
 * press uses (the running job's commit, else HEAD), and the common keys
 * arranged as a remote control. Keys the layout does not know go to a list.
 */
import type { TestPack } from '../core/ports.js';
import { parseLircConfig } from '../hardware/ir/lirc/index.js';
import { remoteFile } from '../hardware/ir/keys.js';

export interface WebRemote {
  name: string;
  keys: string[];
}

export interface WebRemotes {
  remotes: WebRemote[];
  /** The test pack's default_remote_control, else the first; null without remotes. */
  chosen: string | null;
  /** Why there are none, for the page (no test pack yet, a broken file...). */
  problem?: string;
}

/** Key names of one lircd.conf: those of the remote named like the file, else of its first remote. */
export function keysOf(text: string, name: string): string[] {
  const remotes = parseLircConfig(text, `${name}.lircd.conf`);
  const r = remotes.find((x) => x.name.toLowerCase() === name.toLowerCase()) ?? remotes[0];
  return r ? [...new Set(r.codes.map((c) => c.name))] : [];
}

export async function loadRemotes(testPack: Pick<TestPack, 'resolve' | 'remoteControls' | 'readFile' | 'config'>, revision: string): Promise<WebRemotes> {
  try {
    const sha = (await testPack.resolve(revision)).sha;
    const names = await testPack.remoteControls(sha);
    const remotes: WebRemote[] = [];
    for (const name of names) {
      const text = await testPack.readFile(sha, remoteFile(name));
      let keys: string[] = [];
      try {
        keys = text === undefined ? [] : keysOf(text, name);
      } catch {
        keys = []; // a file LIRC cannot read: listed without keys (a press reports the parse error)
      }
      remotes.push({ name, keys });
    }
    const preferred = (await testPack.config(sha)).test_pack?.default_remote_control;
    const chosen = names.find((n) => n === preferred) ?? names[0] ?? null;
    return { remotes, chosen, ...(names.length === 0 && { problem: 'the test pack has no config/remote-control/*.lircd.conf' }) };
  } catch (e) {
    return { remotes: [], chosen: null, problem: `the test pack's remotes could not be read: ${(e as Error).message}` };
  }
}

/** One button of the laid-out remote: the LIRC key names it stands for (the first the remote has wins). */
export interface RemoteButton {
  keys: string[];
  label: string;
  /** Spoken name (aria-label). */
  name: string;
}

const b = (label: string, name: string, ...keys: string[]): RemoteButton => ({ label, name, keys });

/** The common keys, row by row, as a remote control is usually laid out. */
export const LAYOUT: RemoteButton[][] = [
  [b('Power', 'Power', 'KEY_POWER'), b('Menu', 'Menu', 'KEY_MENU', 'KEY_HOME'), b('Info', 'Info', 'KEY_INFO', 'KEY_EPG'), b('Back', 'Back', 'KEY_BACK', 'KEY_EXIT')],
  [b('1', '1', 'KEY_1'), b('2', '2', 'KEY_2'), b('3', '3', 'KEY_3')],
  [b('4', '4', 'KEY_4'), b('5', '5', 'KEY_5'), b('6', '6', 'KEY_6')],
  [b('7', '7', 'KEY_7'), b('8', '8', 'KEY_8'), b('9', '9', 'KEY_9')],
  [b('0', '0', 'KEY_0')],
  [b('▲', 'Up', 'KEY_UP')],
  [b('◀', 'Left', 'KEY_LEFT'), b('OK', 'OK', 'KEY_OK', 'KEY_ENTER', 'KEY_SELECT'), b('▶', 'Right', 'KEY_RIGHT')],
  [b('▼', 'Down', 'KEY_DOWN')],
  [b('CH+', 'Channel up', 'KEY_CHANNELUP'), b('VOL+', 'Volume up', 'KEY_VOLUMEUP'), b('Mute', 'Mute', 'KEY_MUTE')],
  [b('CH−', 'Channel down', 'KEY_CHANNELDOWN'), b('VOL−', 'Volume down', 'KEY_VOLUMEDOWN')],
  [b('⏪', 'Rewind', 'KEY_REWIND'), b('⏯', 'Play/pause', 'KEY_PLAYPAUSE', 'KEY_PLAY'), b('⏩', 'Fast forward', 'KEY_FASTFORWARD'), b('⏹', 'Stop', 'KEY_STOP'), b('⏺', 'Record', 'KEY_RECORD')],
  [b('Red', 'Red', 'KEY_RED'), b('Green', 'Green', 'KEY_GREEN'), b('Yellow', 'Yellow', 'KEY_YELLOW'), b('Blue', 'Blue', 'KEY_BLUE')],
];

/** The remote's buttons as laid out (rows without any of its keys dropped) and the keys left over. */
export function arrange(keys: readonly string[]): { rows: { key: string; button: RemoteButton }[][]; others: string[] } {
  const have = new Set(keys.map((k) => k.toUpperCase()));
  const byUpper = new Map(keys.map((k) => [k.toUpperCase(), k]));
  const used = new Set<string>();
  const rows = LAYOUT.map((row) =>
    row.flatMap((button) => {
      const k = button.keys.find((x) => have.has(x));
      if (k === undefined) return [];
      used.add(k);
      return [{ key: byUpper.get(k)!, button }];
    }),
  ).filter((row) => row.length > 0);
  return { rows, others: keys.filter((k) => !used.has(k.toUpperCase())) };
}
