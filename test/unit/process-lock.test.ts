/** The machine-wide test lock (test/helpers/processLock.ts): waits while held, is taken over from a dead owner, says who holds it on a timeout. */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processLock } from '../helpers/processLock.js';

const unique = () => `unit-${process.pid}-${Math.random().toString(16).slice(2, 10)}`;

describe('processLock (test helper)', () => {
  it('a second taker waits until the holder releases, then holds it', async () => {
    const name = unique();
    const first = await processLock(name);
    let second: (() => void) | undefined;
    const waiting = processLock(name, 60_000).then((r) => (second = r));
    await new Promise((r) => setImmediate(r));
    expect(second).to.equal(undefined);
    first();
    (await waiting)();
  });

  it('times out naming the holder', async () => {
    const name = unique();
    const held = await processLock(name);
    try {
      let err: unknown;
      await processLock(name, 300).catch((e: unknown) => (err = e));
      expect(String(err)).to.match(new RegExp(`still held by pid ${process.pid}`));
    } finally {
      held();
    }
  });

  it("takes over a lock whose owner has died", async () => {
    const name = unique();
    const child = spawn(process.execPath, ['-e', '0']);
    const pid = child.pid!;
    await new Promise((r) => child.once('exit', r));
    const dir = path.join(os.tmpdir(), `farmhand-lock-${name}`);
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'pid'), String(pid));
    (await processLock(name, 30_000))();
  });
});
