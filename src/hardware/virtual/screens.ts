/**
 * What each page of the virtual set-top box looks like, as SVG fragments in
 * a fixed 1280x720 design space (render.ts scales it to the capture size).
 * Colours and positions are constants so frames are the same every time and
 * templates cut from them keep matching.
 */
import { APP_COLUMNS, APPS, CHANNELS, channelName, HOME_ITEMS, type Page, type StbView } from './state.js';

/** The design space every page is laid out in. */
export const DESIGN_WIDTH = 1280;
export const DESIGN_HEIGHT = 720;

/** Fixed colours (also what tests and templates rely on). */
export const COLOURS = {
  background: '#10182B',
  panel: '#1A2642',
  item: '#22304F',
  itemText: '#C8D0E0',
  focus: '#F2B705',
  focusText: '#10182B',
  text: '#FFFFFF',
  dim: '#8A94A8',
  banner: '#0B0F1A',
  record: '#E5484D',
} as const;

/** The accent bar under each page's title. */
export const PAGE_ACCENT: Record<Exclude<Page, 'home' | 'live'>, string> = {
  guide: '#3BA55C',
  recordings: '#E5484D',
  apps: '#8E6CEF',
  settings: '#3E9BDB',
};

const SANS = 'font-family="DejaVu Sans"';

/** Geometry of the main menu items (design units). */
export const MENU = { x: 80, y: 140, width: 400, height: 80, step: 96 } as const;
/** Geometry of the app tiles. */
export const TILE = { x: 80, y: 200, width: 340, height: 190, stepX: 380, stepY: 220 } as const;
/** The channel banner and the digit-entry box. */
export const BANNER = { x: 80, y: 560, width: 1120, height: 110 } as const;
export const ENTRY_BOX = { x: 1000, y: 90, width: 240, height: 70 } as const;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function text(x: number, y: number, size: number, fill: string, s: string, extra = ''): string {
  return `<text x="${x}" y="${y}" ${SANS} font-size="${size}" fill="${fill}" ${extra}>${esc(s)}</text>`;
}

function rect(x: number, y: number, w: number, h: number, fill: string, extra = ''): string {
  return `<rect x="${x}" y="${y}" width="${w}" height="${h}" fill="${fill}" ${extra}/>`;
}

const DESCRIPTIONS: Record<string, string> = {
  'Live TV': 'Watch what is on now',
  Guide: 'See what is on later',
  Recordings: 'Play back your recordings',
  Apps: 'Weather, news, games and more',
  Settings: 'Language, subtitles, version',
};

function home(v: StbView): string {
  const items = HOME_ITEMS.map(({ label }, i) => {
    const y = MENU.y + i * MENU.step;
    const focused = i === v.homeFocus;
    return (
      rect(MENU.x, y, MENU.width, MENU.height, focused ? COLOURS.focus : COLOURS.item) +
      text(MENU.x + 30, y + 52, 34, focused ? COLOURS.focusText : COLOURS.itemText, label, focused ? 'font-weight="bold"' : '')
    );
  });
  const focused = HOME_ITEMS[v.homeFocus]?.label ?? '';
  const panel =
    rect(560, MENU.y, 640, 4 * MENU.step + MENU.height, COLOURS.panel) +
    text(600, 230, 52, COLOURS.text, focused, 'font-weight="bold"') +
    text(600, 290, 28, COLOURS.dim, DESCRIPTIONS[focused] ?? '') +
    text(600, 580, 24, COLOURS.dim, 'OK to open, BACK to return');
  return logo() + items.join('') + panel;
}

function logo(): string {
  return text(40, 60, 32, COLOURS.focus, 'farmhand TV', 'font-weight="bold"');
}

/** A page's title and its coloured accent bar. */
function title(page: keyof typeof PAGE_ACCENT, label: string): string {
  return logo() + text(80, 130, 56, COLOURS.text, label, 'font-weight="bold"') + rect(80, 150, 240, 8, PAGE_ACCENT[page]);
}

function guide(): string {
  const times = ['18:00', '18:30', '19:00', '19:30'].map((t, i) => text(300 + i * 220, 210, 24, COLOURS.dim, t));
  const shows = [
    ['Morning Harvest', 'Farm Report'],
    ['Tractor Pull Live', 'Highlights'],
    ['Forecast', 'Storm Watch', 'Forecast'],
    ['Barnyard Friends', 'Hay Day'],
  ];
  const rows = shows.map((titles, r) => {
    const y = 240 + r * 80;
    const ch = CHANNELS[r];
    const width = 880 / titles.length;
    const blocks = titles.map(
      (t, i) => rect(300 + i * width, y, width - 8, 68, i === 0 ? '#2B4A7A' : COLOURS.item) + text(316 + i * width, y + 44, 24, COLOURS.text, t),
    );
    return rect(80, y, 204, 68, COLOURS.panel) + text(96, y + 44, 22, COLOURS.text, ch?.name ?? '') + blocks.join('');
  });
  return title('guide', 'Guide') + times.join('') + rows.join('');
}

function recordings(): string {
  const list = [
    ['The Big Harvest', 'Mon 18:00', '58 min'],
    ['Tractor Pull Final', 'Sat 20:30', '1 h 45 min'],
    ['Storm Watch Special', 'Sun 19:00', '42 min'],
  ];
  const rows = list.map(([name = '', when = '', length = ''], i) => {
    const y = 200 + i * 100;
    return (
      rect(80, y, 1120, 84, COLOURS.item) +
      `<circle cx="124" cy="${y + 42}" r="16" fill="${COLOURS.record}"/>` +
      text(164, y + 52, 32, COLOURS.text, name) +
      text(1180, y + 52, 26, COLOURS.dim, `${when}  ${length}`, 'text-anchor="end"')
    );
  });
  return title('recordings', 'Recordings') + rows.join('');
}

const TILE_COLOURS = ['#2E7A8C', '#8C2E2E', '#4F6B2E', '#8C2E74', '#B5762A', '#5B3E8C'];

function apps(v: StbView): string {
  const tiles = APPS.map((name, i) => {
    const x = TILE.x + (i % APP_COLUMNS) * TILE.stepX;
    const y = TILE.y + Math.floor(i / APP_COLUMNS) * TILE.stepY;
    const focused = i === v.appFocus;
    const focus = focused ? `stroke="${COLOURS.text}" stroke-width="8"` : '';
    // An underline under the name as well as the frame, so a template of the name alone tells focus.
    const underline = focused ? rect(x + TILE.width / 2 - 90, y + 140, 180, 10, COLOURS.focus) : '';
    return (
      rect(x, y, TILE.width, TILE.height, TILE_COLOURS[i] ?? COLOURS.item, focus) +
      underline +
      text(x + TILE.width / 2, y + TILE.height / 2 + 14, 40, COLOURS.text, name, 'text-anchor="middle" font-weight="bold"')
    );
  });
  return title('apps', 'Apps') + tiles.join('');
}

function settings(): string {
  const list = [
    ['Language', 'English'],
    ['Subtitles', 'Off'],
    ['Audio', 'Stereo'],
    ['Version', 'vSTB 1.0'],
  ];
  const rows = list.map(([k = '', val = ''], i) => {
    const y = 200 + i * 90;
    return rect(80, y, 1120, 74, COLOURS.item) + text(110, y + 48, 30, COLOURS.text, k) + text(1170, y + 48, 30, COLOURS.dim, val, 'text-anchor="end"');
  });
  return title('settings', 'Settings') + rows.join('');
}

function live(v: StbView): string {
  const colour = CHANNELS.find((c) => c.number === v.channel)?.colour ?? '#202020';
  return rect(0, 0, DESIGN_WIDTH, DESIGN_HEIGHT, colour) + text(640, 340, 96, COLOURS.text, channelName(v.channel), 'text-anchor="middle" font-weight="bold" fill-opacity="0.35"');
}

/** The channel banner: "CH 101 - Farm News". */
export function bannerText(channel: number): string {
  return `CH ${channel} - ${channelName(channel)}`;
}

function banner(v: StbView): string {
  const b = BANNER;
  return rect(b.x, b.y, b.width, b.height, COLOURS.banner) + rect(b.x, b.y, 12, b.height, COLOURS.focus) + text(b.x + 48, b.y + 70, 48, COLOURS.text, bannerText(v.channel), 'font-weight="bold"');
}

function entryBox(v: StbView): string {
  const e = ENTRY_BOX;
  const shown = `CH ${v.entry.padEnd(3, '-')}`;
  return rect(e.x, e.y, e.width, e.height, COLOURS.banner) + text(e.x + e.width / 2, e.y + 50, 40, COLOURS.focus, shown, 'text-anchor="middle" font-weight="bold"');
}

const PAGES: Record<Page, (v: StbView) => string> = { home, live, guide, recordings, apps, settings };

/** The SVG body (without the clock) of a powered-on view. */
export function screenBody(v: StbView): string {
  return PAGES[v.page](v) + (v.banner && v.page === 'live' ? banner(v) : '') + (v.entry !== '' ? entryBox(v) : '');
}
