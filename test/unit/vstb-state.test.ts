/**
 * The virtual set-top box's state machine, key by key: the main menu's
 * focus, pages that open on OK and close on BACK, channel entry with digits
 * and its timeout, the banner, the apps grid, standby.
 */
import { expect } from 'chai';
import {
  advanceTime,
  APPS,
  BANNER_MS,
  channelName,
  CHANNELS,
  ENTRY_TIMEOUT_MS,
  HOME_ITEMS,
  initialState,
  pressKey,
  stepChannel,
  viewOf,
  type StbState,
} from '../../src/hardware/virtual/state.js';

/** Press keys one after another, 100 ms apart, starting at `t0`. */
function press(s: StbState, keys: string[], t0 = 1000): StbState {
  return keys.reduce((st, k, i) => pressKey(st, k, t0 + i * 100), s);
}

const home = initialState();

describe('virtual set-top box: state machine', () => {
  it('starts on the main menu with the first item focused, powered on, tuned to 101', () => {
    expect(viewOf(home)).to.deep.equal({ power: true, page: 'home', homeFocus: 0, appFocus: 0, channel: 101, entry: '', banner: false });
  });

  it('KEY_DOWN/KEY_UP move the menu focus and stop at the ends (no wrap-around)', () => {
    expect(press(home, ['KEY_DOWN']).homeFocus).to.equal(1);
    expect(press(home, ['KEY_DOWN', 'KEY_DOWN', 'KEY_UP']).homeFocus).to.equal(1);
    expect(press(home, ['KEY_UP']).homeFocus).to.equal(0);
    const last = HOME_ITEMS.length - 1;
    expect(press(home, Array<string>(HOME_ITEMS.length + 2).fill('KEY_DOWN')).homeFocus).to.equal(last);
  });

  it('KEY_LEFT/KEY_RIGHT do nothing on the main menu', () => {
    const s = press(home, ['KEY_DOWN']);
    expect(press(s, ['KEY_LEFT', 'KEY_RIGHT'])).to.deep.equal(s);
  });

  it('KEY_OK opens the focused item\'s page; KEY_BACK returns to the menu with the focus kept', () => {
    HOME_ITEMS.forEach((item, i) => {
      const opened = press(home, [...Array<string>(i).fill('KEY_DOWN'), 'KEY_OK']);
      expect(opened.page, item.label).to.equal(item.page);
      const back = pressKey(opened, 'KEY_BACK', 5000);
      expect([back.page, back.homeFocus]).to.deep.equal(['home', i]);
    });
  });

  it('KEY_BACK on the main menu and unknown keys change nothing', () => {
    expect(press(home, ['KEY_BACK'])).to.deep.equal(home);
    expect(press(home, ['KEY_VOLUMEUP', 'KEY_RED'])).to.deep.equal(home);
  });

  it('KEY_MENU goes to the main menu from any page', () => {
    for (const page of ['live', 'guide', 'recordings', 'apps', 'settings'] as const) {
      expect(press({ ...home, page }, ['KEY_MENU']).page).to.equal('home');
    }
  });

  it('opening Live TV shows the banner "CH 101 - Farm News" for BANNER_MS', () => {
    const live = pressKey(home, 'KEY_OK', 1000);
    expect(viewOf(live)).to.include({ page: 'live', channel: 101, banner: true });
    expect(viewOf(advanceTime(live, 1000 + BANNER_MS - 1)).banner).to.equal(true);
    expect(viewOf(advanceTime(live, 1000 + BANNER_MS)).banner).to.equal(false);
    expect(channelName(101)).to.equal('Farm News');
  });

  it('on Live TV, KEY_CHANNELUP/KEY_UP and KEY_CHANNELDOWN/KEY_DOWN step through the line-up, wrapping', () => {
    const live = pressKey(home, 'KEY_OK', 1000);
    expect(press(live, ['KEY_CHANNELUP']).channel).to.equal(102);
    expect(press(live, ['KEY_UP', 'KEY_UP']).channel).to.equal(103);
    expect(press(live, ['KEY_CHANNELDOWN']).channel).to.equal(110);
    expect(press(live, ['KEY_DOWN']).channel).to.equal(110);
    expect(stepChannel(110, 1)).to.equal(101);
    expect(stepChannel(150, -1)).to.equal(110);
    expect(stepChannel(50, 1)).to.equal(101);
  });

  it('KEY_INFO and KEY_OK on Live TV show the banner again', () => {
    const live = pressKey(home, 'KEY_OK', 1000);
    const later = advanceTime(live, 20_000);
    expect(viewOf(later).banner).to.equal(false);
    expect(viewOf(pressKey(later, 'KEY_INFO', 20_000)).banner).to.equal(true);
    expect(viewOf(pressKey(later, 'KEY_OK', 20_000)).banner).to.equal(true);
  });

  it('three digits tune at once and open Live TV with the banner', () => {
    const s = press(home, ['KEY_1', 'KEY_0', 'KEY_5']);
    expect(viewOf(s)).to.include({ page: 'live', channel: 105, entry: '', banner: true });
  });

  it('fewer digits wait: shown as typed, tuned ENTRY_TIMEOUT_MS after the last digit', () => {
    const typing = press(home, ['KEY_1', 'KEY_0']); // last digit at 1100
    expect(viewOf(typing)).to.include({ page: 'home', entry: '10' });
    expect(advanceTime(typing, 1100 + ENTRY_TIMEOUT_MS - 1).entry).to.equal('10');
    const tuned = advanceTime(typing, 1100 + ENTRY_TIMEOUT_MS);
    expect(viewOf(tuned)).to.include({ page: 'live', channel: 10, entry: '', banner: true });
    expect(channelName(10)).to.equal('No signal');
    // The banner's time counts from the timeout, not from when time was next looked at.
    expect(viewOf(advanceTime(typing, 1100 + ENTRY_TIMEOUT_MS + BANNER_MS)).banner).to.equal(false);
  });

  it('KEY_OK tunes the digits typed at once; another key abandons them', () => {
    expect(viewOf(press(home, ['KEY_7', 'KEY_OK']))).to.include({ page: 'live', channel: 7 });
    const abandoned = press(home, ['KEY_1', 'KEY_DOWN']);
    expect(viewOf(abandoned)).to.include({ page: 'home', entry: '', homeFocus: 1, channel: 101 });
  });

  it('every digit key KEY_0..KEY_9 is a digit', () => {
    for (let d = 0; d <= 9; d++) expect(pressKey(home, `KEY_${d}`, 0).entry).to.equal(String(d));
  });

  it('the apps grid: arrows move the focus in 2 rows of 3 and stop at the edges', () => {
    const apps = { ...home, page: 'apps' as const };
    expect(press(apps, ['KEY_RIGHT']).appFocus).to.equal(1);
    expect(press(apps, ['KEY_DOWN']).appFocus).to.equal(3);
    expect(press(apps, ['KEY_DOWN', 'KEY_RIGHT', 'KEY_UP']).appFocus).to.equal(1);
    expect(press(apps, ['KEY_LEFT', 'KEY_UP']).appFocus).to.equal(0);
    expect(press(apps, ['KEY_RIGHT', 'KEY_RIGHT', 'KEY_RIGHT', 'KEY_DOWN', 'KEY_DOWN']).appFocus).to.equal(APPS.length - 1);
    expect(press(apps, ['KEY_OK']).appFocus).to.equal(0);
  });

  it('arrows and OK do nothing on Guide, Recordings and Settings', () => {
    for (const page of ['guide', 'recordings', 'settings'] as const) {
      const s = { ...home, page };
      expect(press(s, ['KEY_UP', 'KEY_DOWN', 'KEY_LEFT', 'KEY_RIGHT', 'KEY_OK', 'KEY_INFO', 'KEY_CHANNELUP'])).to.deep.equal(s);
    }
  });

  it('KEY_POWER: standby ignores every other key; on again returns to the main menu on the same channel', () => {
    const tuned = press(home, ['KEY_1', 'KEY_0', 'KEY_3', 'KEY_BACK', 'KEY_DOWN']);
    const off = pressKey(tuned, 'KEY_POWER', 5000);
    expect(off.power).to.equal(false);
    expect(press(off, ['KEY_OK', 'KEY_1', 'KEY_MENU'], 6000)).to.deep.equal(off);
    const on = pressKey(off, 'KEY_POWER', 7000);
    expect(viewOf(on)).to.deep.equal({ ...viewOf(home), channel: 103 });
  });

  it('the line-up has 10 channels with distinct numbers and names', () => {
    expect(new Set(CHANNELS.map((c) => c.number)).size).to.equal(10);
    expect(new Set(CHANNELS.map((c) => c.name)).size).to.equal(10);
  });
});
