// The event journal (storage/eventJournal.ts) under the hub: events survive a restart (the journal is reopened
// without being closed, as after SIGKILL), a torn last line is cut off, rotation keeps order and the bound, and
// since() answers an id of an earlier run from what is kept. Real files in a temporary folder; a hand-moved clock.
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { appendFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EventHub, type FarmEvent } from '../../src/core/events.js';
import { FileEventJournal } from '../../src/storage/eventJournal.js';
import { FakeClock } from '../fixtures/fakeClock.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const press = (key: string) => ({ key, remote: 'tv', hold_ms: 0, source: 'api' as const, username: 'alice', result_id: null });
const keys = (events: FarmEvent[]) => events.map((e) => (e.data as { key: string }).key);

describe('event journal', () => {
  let dir: string;
  const open: FileEventJournal[] = [];
  beforeEach(async () => {
    dir = path.join(await mkdtemp(path.join(os.tmpdir(), 'farmhand-journal-')), 'events');
  });
  afterEach(async () => {
    for (const j of open.splice(0)) await j.close();
    await rm(path.dirname(dir), { recursive: true, force: true });
  });

  /** A daemon start: open the journal on `dir`, a hub on it. The previous journal is left open (a crash). */
  async function start(keep: number, clock: FakeClock) {
    const load = await FileEventJournal.open({ dir, keep, nodeId: 'node-1', fsyncMs: 5 });
    open.push(load.journal);
    const hub = new EventHub({ nodeId: 'node-1', bufferSize: keep, now: clock.now, journal: load.journal, history: load.history });
    return { hub, ...load };
  }

  it('a restart without close keeps every event; since() with an id of the earlier run answers the events after it, then the new run', async () => {
    const clock = new FakeClock(T0);
    const first = await start(10, clock);
    for (let i = 1; i <= 4; i++) first.hub.publish('key.pressed', press(`A${i}`));
    const seen = `${first.hub.boot}-2`; // a client read up to A2, then the node died

    // The clock went back: ids must still be later than the earlier run's.
    clock.advance(-60_000);
    const second = await start(10, clock);
    expect(parseInt(second.hub.boot, 36)).to.be.greaterThan(parseInt(first.hub.boot, 36));
    expect(keys(second.history)).to.deep.equal(['A1', 'A2', 'A3', 'A4']);
    expect(second.hub.since(seen)).to.deep.include({ missed: null });
    expect(keys(second.hub.since(seen).events)).to.deep.equal(['A3', 'A4']);
    second.hub.publish('key.pressed', press('B1'));
    expect(keys(second.hub.since(seen).events)).to.deep.equal(['A3', 'A4', 'B1']);
    expect(second.hub.since(`${first.hub.boot}-4`).events.map((e) => e.id)).to.deep.equal([`${second.hub.boot}-1`]);
    expect(second.hub.since(`${second.hub.boot}-1`)).to.deep.equal({ events: [], missed: null });
    // An id of the earlier run that was never handed out: that run's events after it were not kept.
    expect(second.hub.since(`${first.hub.boot}-9`).missed?.reason).to.equal('restarted');
    // A later boot than this run's: never handed out.
    expect(second.hub.since(`${(parseInt(second.hub.boot, 36) + 1).toString(36)}-1`).missed?.reason).to.equal('unknown_id');
  });

  it('an event is in the journal file before any subscriber sees it', async () => {
    const clock = new FakeClock(T0);
    const { hub } = await start(10, clock);
    const onDiskWhenSeen: boolean[] = [];
    hub.subscribe((e) => {
      const text = readdirSync(dir)
        .map((f) => readFileSync(path.join(dir, f), 'utf8'))
        .join('');
      onDiskWhenSeen.push(text.includes(`"id":"${e.id}"`));
    });
    for (let i = 1; i <= 3; i++) hub.publish('key.pressed', press(`A${i}`));
    expect(onDiskWhenSeen).to.deep.equal([true, true, true]);
  });

  it('a torn last line (a crash mid-write) is cut off; the events before it are kept and the next append is a line of its own', async () => {
    const clock = new FakeClock(T0);
    const first = await start(10, clock);
    first.hub.publish('key.pressed', press('A1'));
    first.hub.publish('key.pressed', press('A2'));
    const [segment] = await readdir(dir);
    await appendFile(path.join(dir, segment!), `{"id":"${first.hub.boot}-3","type":"key.pre`);

    clock.advance(1);
    const second = await start(10, clock);
    expect(second.torn).to.equal(1);
    expect(keys(second.history)).to.deep.equal(['A1', 'A2']);
    second.hub.publish('key.pressed', press('B1'));

    clock.advance(1);
    const third = await start(10, clock);
    expect(third.torn).to.equal(0);
    expect(third.skipped).to.equal(0);
    expect(keys(third.history)).to.deep.equal(['A1', 'A2', 'B1']);
    const text = await readFile(path.join(dir, segment!), 'utf8');
    expect(text.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as FarmEvent).id)).to.deep.equal([`${first.hub.boot}-1`, `${first.hub.boot}-2`, `${second.hub.boot}-1`]);
  });

  it('lines that are not events of this node are skipped, not fatal', async () => {
    const clock = new FakeClock(T0);
    const first = await start(10, clock);
    first.hub.publish('key.pressed', press('A1'));
    const [segment] = await readdir(dir);
    const other = { ...first.hub.buffered()[0]!, id: 'zz-1', data: { ...first.hub.buffered()[0]!.data, node_id: 'node-2' } };
    await appendFile(path.join(dir, segment!), `not json\n{"id":"bad id","type":"key.pressed","time":"x","data":{"node_id":"node-1"}}\n${JSON.stringify(other)}\n`);
    clock.advance(1);
    const second = await start(10, clock);
    expect(second.skipped).to.equal(3);
    expect(keys(second.history)).to.deep.equal(['A1']);
  });

  it('rotation keeps at least `keep` events, in order, across restarts, in a bounded number of files; an id no longer kept is too_old', async () => {
    const clock = new FakeClock(T0);
    const keep = 3;
    const ids: string[] = [];
    let n = 0;
    let last: Awaited<ReturnType<typeof start>> | undefined;
    for (let run = 0; run < 4; run++) {
      clock.advance(1000);
      last = await start(keep, clock);
      for (let i = 0; i < 4; i++) {
        last.hub.publish('key.pressed', press(`K${++n}`));
        ids.push(last.hub.lastId!);
      }
      await last.journal.flush();
      const files = (await readdir(dir)).filter((f) => f.endsWith('.jsonl'));
      expect(files.length, files.join(' ')).to.be.at.most(3);
    }
    clock.advance(1000);
    const after = await start(keep, clock);
    // The last `keep` in order, and the one before them (which a resume may name).
    expect(keys(after.history)).to.deep.equal(['K12', 'K13', 'K14', 'K15', 'K16'].slice(-(keep + 1)));
    expect(keys(after.hub.buffered())).to.deep.equal(['K14', 'K15', 'K16']);
    // After K13 (no longer buffered, but the next is): nothing missed.
    expect(after.hub.since(ids[12])).to.deep.include({ missed: null });
    expect(keys(after.hub.since(ids[12]).events)).to.deep.equal(['K14', 'K15', 'K16']);
    // After K12 (of the same earlier run) or K2 (of the first): K13 is gone.
    expect(after.hub.since(ids[11]).missed?.reason).to.equal('too_old');
    expect(after.hub.since(ids[1]).missed).to.deep.equal({ reason: 'too_old', last_event_id: ids[1], oldest_event_id: ids[13] });
    // The files hold what was published, in order, no line twice.
    const lines: string[] = [];
    for (const f of (await readdir(dir)).sort()) lines.push(...(await readFile(path.join(dir, f), 'utf8')).split('\n').filter(Boolean));
    const onDisk = lines.map((l) => (JSON.parse(l) as FarmEvent).id);
    expect(onDisk).to.deep.equal(ids.slice(ids.length - onDisk.length));
    expect(onDisk.length).to.be.within(keep, 2 * keep + 1);
  });

  it('a journal that lost its files: an id of an earlier run is restarted (its events are gone), not too_old', async () => {
    const clock = new FakeClock(T0);
    const first = await start(5, clock);
    first.hub.publish('key.pressed', press('A1'));
    await rm(dir, { recursive: true });
    clock.advance(1);
    const second = await start(5, clock);
    second.hub.publish('key.pressed', press('B1'));
    expect(second.hub.since(`${first.hub.boot}-1`).missed?.reason).to.equal('restarted');
  });

  it('close flushes; appends after close are ignored', async () => {
    const clock = new FakeClock(T0);
    const first = await start(5, clock);
    first.hub.publish('key.pressed', press('A1'));
    await first.journal.close();
    first.hub.publish('key.pressed', press('A2'));
    expect(first.journal.appended).to.equal(1);
    expect(first.journal.failures).to.equal(0);
    clock.advance(1);
    const second = await start(5, clock);
    expect(keys(second.history)).to.deep.equal(['A1']);
  });
});
