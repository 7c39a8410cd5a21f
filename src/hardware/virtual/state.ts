/**
 * The virtual set-top box's behaviour as a pure state machine: which page is
 * shown, where the focus is, the tuned channel, digits being typed, the
 * channel banner. No I/O and no timers: every function takes the time
 * (milliseconds) it should act at, so tests can drive it key by key.
 */

/** The pages of the box. `home` is the main menu. */
export type Page = 'home' | 'live' | 'guide' | 'recordings' | 'apps' | 'settings';

/** The main menu, top to bottom, and the page each item opens. */
export const HOME_ITEMS: readonly { label: string; page: Page }[] = [
  { label: 'Live TV', page: 'live' },
  { label: 'Guide', page: 'guide' },
  { label: 'Recordings', page: 'recordings' },
  { label: 'Apps', page: 'apps' },
  { label: 'Settings', page: 'settings' },
];

/** The apps page: a grid of tiles, row by row. */
export const APPS: readonly string[] = ['Weather', 'News', 'Games', 'Music', 'Photos', 'Store'];
/** Tiles per row on the apps page. */
export const APP_COLUMNS = 3;

/** The channel line-up: number, name and the colour of its "picture". */
export const CHANNELS: readonly { number: number; name: string; colour: string }[] = [
  { number: 101, name: 'Farm News', colour: '#2E5E8C' },
  { number: 102, name: 'Tractor Sport', colour: '#8C2E2E' },
  { number: 103, name: 'Weather Now', colour: '#2E8C6A' },
  { number: 104, name: 'Kids Barn', colour: '#B5762A' },
  { number: 105, name: 'Movie Field', colour: '#5B3E8C' },
  { number: 106, name: 'Music Meadow', colour: '#8C2E74' },
  { number: 107, name: 'Documentary', colour: '#4F6B2E' },
  { number: 108, name: 'Cooking', colour: '#8C5B2E' },
  { number: 109, name: 'Travel', colour: '#2E7A8C' },
  { number: 110, name: 'Shopping', colour: '#6B6B6B' },
];

/** Digits typed are tuned this long after the last one (or at once after the third, or on OK). */
export const ENTRY_TIMEOUT_MS = 1500;
/** Most digits a channel number has. */
export const MAX_DIGITS = 3;
/** How long the channel banner stays after tuning (or KEY_INFO). */
export const BANNER_MS = 5000;

/** Everything the box remembers. Treat as immutable: the functions return new objects. */
export interface StbState {
  /** false: standby, a black screen; only KEY_POWER does anything. */
  power: boolean;
  page: Page;
  /** Index into HOME_ITEMS of the focused menu item (kept while a page is open). */
  homeFocus: number;
  /** Index into APPS of the focused tile. */
  appFocus: number;
  /** The tuned channel number (need not be in CHANNELS: then "No signal"). */
  channel: number;
  /** Digits typed and not yet tuned; '' when none. */
  entry: string;
  /** When the last digit was typed (ms). */
  entryAt: number;
  /** The banner shows until this time (ms); 0 when hidden. */
  bannerUntil: number;
}

/** The box as it starts: powered on, main menu, "Live TV" focused, tuned to 101. */
export function initialState(): StbState {
  return { power: true, page: 'home', homeFocus: 0, appFocus: 0, channel: 101, entry: '', entryAt: 0, bannerUntil: 0 };
}

/** The name shown in the banner for a channel number. */
export function channelName(n: number): string {
  return CHANNELS.find((c) => c.number === n)?.name ?? 'No signal';
}

/** What the passing of time does: tune a number whose entry timed out, hide an expired banner. */
export function advanceTime(s: StbState, now: number): StbState {
  let next = s;
  if (next.entry !== '' && now - next.entryAt >= ENTRY_TIMEOUT_MS) next = commitEntry(next, next.entryAt + ENTRY_TIMEOUT_MS);
  if (next.bannerUntil !== 0 && now >= next.bannerUntil) next = { ...next, bannerUntil: 0 };
  return next;
}

/**
 * The box's reaction to one key press (a LIRC key name such as `KEY_OK`) at
 * time `now`. Unknown keys change nothing.
 */
export function pressKey(state: StbState, key: string, now: number): StbState {
  const s = advanceTime(state, now);
  if (key === 'KEY_POWER') return s.power ? { ...initialState(), power: false, channel: s.channel } : { ...s, power: true };
  if (!s.power) return s;
  const digit = /^KEY_([0-9])$/.exec(key)?.[1];
  if (digit !== undefined) return typeDigit(s, digit, now);
  if (s.entry !== '') {
    // OK tunes what was typed; any other key abandons the entry and acts as usual.
    if (key === 'KEY_OK') return commitEntry(s, now);
    return pressKey({ ...s, entry: '' }, key, now);
  }
  if (key === 'KEY_MENU') return { ...s, page: 'home' };
  if (key === 'KEY_BACK') return s.page === 'home' ? s : { ...s, page: 'home' };
  switch (s.page) {
    case 'home':
      return onHome(s, key, now);
    case 'live':
      return onLive(s, key, now);
    case 'apps':
      return onApps(s, key);
    default:
      return s;
  }
}

function typeDigit(s: StbState, digit: string, now: number): StbState {
  const typed = { ...s, entry: s.entry + digit, entryAt: now };
  return typed.entry.length >= MAX_DIGITS ? commitEntry(typed, now) : typed;
}

function commitEntry(s: StbState, now: number): StbState {
  return tune({ ...s, entry: '' }, Number(s.entry), now);
}

function tune(s: StbState, channel: number, now: number): StbState {
  return { ...s, page: 'live', channel, bannerUntil: now + BANNER_MS };
}

function onHome(s: StbState, key: string, now: number): StbState {
  const last = HOME_ITEMS.length - 1;
  switch (key) {
    case 'KEY_UP':
      return { ...s, homeFocus: Math.max(0, s.homeFocus - 1) };
    case 'KEY_DOWN':
      return { ...s, homeFocus: Math.min(last, s.homeFocus + 1) };
    case 'KEY_OK': {
      const page = HOME_ITEMS[s.homeFocus]?.page ?? 'home';
      return page === 'live' ? tune(s, s.channel, now) : { ...s, page };
    }
    default:
      return s;
  }
}

function onLive(s: StbState, key: string, now: number): StbState {
  switch (key) {
    case 'KEY_UP':
    case 'KEY_CHANNELUP':
      return tune(s, stepChannel(s.channel, +1), now);
    case 'KEY_DOWN':
    case 'KEY_CHANNELDOWN':
      return tune(s, stepChannel(s.channel, -1), now);
    case 'KEY_OK':
    case 'KEY_INFO':
      return { ...s, bannerUntil: now + BANNER_MS };
    default:
      return s;
  }
}

/** The next channel of the line-up above (+1) or below (-1) `n`, wrapping around. */
export function stepChannel(n: number, dir: 1 | -1): number {
  const numbers = CHANNELS.map((c) => c.number);
  const beyond = dir > 0 ? numbers.find((c) => c > n) : numbers.findLast((c) => c < n);
  return beyond ?? (dir > 0 ? numbers[0] : numbers[numbers.length - 1]) ?? n;
}

function onApps(s: StbState, key: string): StbState {
  const col = s.appFocus % APP_COLUMNS;
  const rows = Math.ceil(APPS.length / APP_COLUMNS);
  const row = Math.floor(s.appFocus / APP_COLUMNS);
  const moves: Record<string, [number, number]> = {
    KEY_LEFT: [row, col - 1],
    KEY_RIGHT: [row, col + 1],
    KEY_UP: [row - 1, col],
    KEY_DOWN: [row + 1, col],
  };
  const to = moves[key];
  if (!to) return s;
  const [r, c] = to;
  const index = r * APP_COLUMNS + c;
  // Focus stops at the edges of the grid; it does not wrap.
  if (r < 0 || r >= rows || c < 0 || c >= APP_COLUMNS || index >= APPS.length) return s;
  return { ...s, appFocus: index };
}

/** The part of the state the screen shows: equal views render identical frames. */
export interface StbView {
  power: boolean;
  page: Page;
  homeFocus: number;
  appFocus: number;
  channel: number;
  entry: string;
  banner: boolean;
}

/** The view of a state (after `advanceTime`). */
export function viewOf(s: StbState): StbView {
  const { power, page, homeFocus, appFocus, channel, entry } = s;
  return { power, page, homeFocus, appFocus, channel, entry, banner: s.bannerUntil !== 0 };
}
