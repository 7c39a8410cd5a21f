/**
 * SharedForwards: identical long polls (await_completion through the portal) share one forward to the
 * node; a late request, or one after the answer, starts its own; the last client to leave cancels it.
 */
import { expect } from 'chai';
import { SharedForwards, type SmallAnswer } from '../../src/farm/portal/sharedForward.js';

const answer = (body: string): SmallAnswer => ({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from(body) });

/** A forward the test answers by hand, with the signal it was given. */
function forwards() {
  const made: { signal: AbortSignal; resolve: (a: SmallAnswer) => void }[] = [];
  const start = (signal: AbortSignal) =>
    new Promise<SmallAnswer>((resolve, reject) => {
      made.push({ signal, resolve });
      signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  return { made, start };
}

describe('portal: shared await_completion forwards', () => {
  let now = 0;
  const shared = () => new SharedForwards({ joinMs: 1000, now: () => now });
  beforeEach(() => (now = 1_000_000));

  it('requests with the same key within joinMs share one forward, and each gets the whole answer', async () => {
    const s = shared();
    const f = forwards();
    const a = s.join('k', f.start);
    now += 999;
    const b = s.join('k', f.start);
    expect(f.made).to.have.length(1);
    expect(s.waiting()).to.equal(2);
    f.made[0]!.resolve(answer('{"status":"exited"}'));
    const [ra, rb] = await Promise.all([a.answer, b.answer]);
    expect(ra.body.toString()).to.equal('{"status":"exited"}');
    expect(rb).to.equal(ra);
    expect(s.stats).to.deep.equal({ forwarded: 1, joined: 1 });
    expect(s.waiting()).to.equal(0);
  });

  it('another key, a request later than joinMs, or one after the answer starts its own forward', async () => {
    const s = shared();
    const f = forwards();
    s.join('k', f.start);
    s.join('other', f.start);
    now += 1001;
    const late = s.join('k', f.start);
    expect(f.made).to.have.length(3);
    f.made[2]!.resolve(answer('late'));
    await late.answer;
    await Promise.resolve();
    s.join('k', f.start); // the answer is out: never handed to a request made after it
    expect(f.made).to.have.length(4);
    expect(s.stats).to.deep.equal({ forwarded: 4, joined: 0 });
  });

  it('the forward is cancelled only when its last client has gone; a request after that starts a new one', async () => {
    const s = shared();
    const f = forwards();
    const a = s.join('k', f.start);
    const b = s.join('k', f.start);
    const settled = a.answer.catch((e: Error) => e.message);
    a.leave();
    a.leave(); // leaving twice counts once
    expect(f.made[0]!.signal.aborted).to.equal(false);
    b.leave();
    expect(f.made[0]!.signal.aborted).to.equal(true);
    expect(await settled).to.equal('aborted');
    s.join('k', f.start);
    expect(f.made).to.have.length(2);
    expect(f.made[1]!.signal.aborted).to.equal(false);
  });

  it('a failed forward fails each of its clients, and the next request tries again', async () => {
    const s = shared();
    let calls = 0;
    const failing = () => (calls++, Promise.reject(new Error('node offline')));
    const a = s.join('k', failing);
    const b = s.join('k', failing);
    expect(await a.answer.catch((e: Error) => e.message)).to.equal('node offline');
    expect(await b.answer.catch((e: Error) => e.message)).to.equal('node offline');
    await Promise.resolve();
    await s.join('k', failing).answer.catch(() => undefined);
    expect(calls).to.equal(2);
  });
});
