/** The stack of resources one process opens and closes (src/service/resources.ts). */
import { expect } from 'chai';
import { ResourceStack, type ResourceEvent } from '../../src/service/resources.js';
import { capturingLogger } from '../helpers/logger.js';

function stackWithLog() {
  const logger = capturingLogger();
  const events: ResourceEvent[] = [];
  const stack = new ResourceStack({ logger, onEvent: (e) => events.push(e) });
  return { stack, logger, events, closed: () => events.filter((e) => e.type === 'closed').map((e) => e.name) };
}

describe('ResourceStack', () => {
  it('opens in order and closes in reverse, each close ended before the next begins', async () => {
    const { stack, events, closed } = stackWithLog();
    const order: string[] = [];
    let releaseA!: () => void;
    const aClosed = new Promise<void>((r) => (releaseA = r));
    expect(await stack.open('a', () => ({ value: 1, close: () => aClosed.then(() => order.push('a')) }))).to.equal(1);
    expect(await stack.open('b', async () => ({ value: 'two', close: async () => void order.push('b') }))).to.equal('two');
    stack.defer('c', () => order.push('c'));
    expect(stack.names()).to.deep.equal(['a', 'b', 'c']);
    const closing = stack.close();
    // b and c are closed; a's close is under way and nothing after it has been told closed.
    await new Promise<void>((r) => setImmediate(r));
    expect(order).to.deep.equal(['c', 'b']);
    expect(events.at(-1)).to.deep.equal({ type: 'closing', name: 'a' });
    releaseA();
    await closing;
    expect(order).to.deep.equal(['c', 'b', 'a']);
    expect(closed()).to.deep.equal(['c', 'b', 'a']);
  });

  it('a failing close is logged and does not skip the ones before it', async () => {
    const { stack, logger, events, closed } = stackWithLog();
    stack.defer('first', () => undefined);
    stack.defer('broken', () => Promise.reject(new Error('disk gone')));
    stack.defer('throws', () => {
      throw new Error('at once');
    });
    await stack.close();
    expect(closed()).to.deep.equal(['first']);
    expect(events.filter((e) => e.type === 'close-failed').map((e) => e.name)).to.deep.equal(['throws', 'broken']);
    expect(logger.entries.filter((e) => e.level === 'warn').map((e) => e.msg)).to.deep.equal(['closing throws failed; closing the rest', 'closing broken failed; closing the rest']);
  });

  it('closes once, however often it is asked; opens nothing once closing', async () => {
    const { stack } = stackWithLog();
    let n = 0;
    stack.defer('x', () => void n++);
    const [p, q] = [stack.close(), stack.close()];
    expect(p).to.equal(q);
    await p;
    await stack.close();
    expect(n).to.equal(1);
    let made = false;
    const err = await stack.open('late', () => ((made = true), { value: 1, close: () => undefined })).catch((e: Error) => e.message);
    expect(err).to.contain('cannot open late');
    expect(made).to.equal(false);
  });

  it("a listener's throw at `opened` fails that open, and the resource still closes with the stack", async () => {
    let closedIt = false;
    const stack = new ResourceStack({
      logger: capturingLogger(),
      onEvent: (e) => {
        if (e.type === 'opened' && e.name === 'bad') throw new Error('injected');
        if (e.type === 'closed') throw new Error('ignored');
      },
    });
    const err = await stack.open('bad', () => ({ value: 1, close: () => void (closedIt = true) })).catch((e: Error) => e.message);
    expect(err).to.equal('injected');
    await stack.close();
    expect(closedIt).to.equal(true);
  });

  it('an opener that throws adds nothing to close', async () => {
    const { stack, closed } = stackWithLog();
    stack.defer('before', () => undefined);
    const err = await stack.open('fails', () => Promise.reject(new Error('no'))).catch((e: Error) => e.message);
    expect(err).to.equal('no');
    await stack.close();
    expect(closed()).to.deep.equal(['before']);
  });
});
