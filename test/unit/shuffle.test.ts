import { expect } from 'chai';
import { schedule, speedWeights, weightedIndex } from '../../src/core/shuffle.js';

/** A small deterministic generator (mulberry32) so the statistics below are repeatable. */
function rng(seed: number) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const take = <T>(it: Iterator<T>, n: number) => Array.from({ length: n }, () => it.next().value as T);

describe('test case order', () => {
  it('without shuffle: the order of test_cases, once', () => {
    expect([...schedule(['a', 'b', 'c'], { forever: false, shuffle: false, weights: [1, 1, 1], rng: rng(1) })]).to.deep.equal(['a', 'b', 'c']);
  });

  it('soak "run forever" repeats the list until stopped', () => {
    const it = schedule(['a', 'b'], { forever: true, shuffle: false, weights: [1, 1], rng: rng(1) });
    expect(take(it, 5)).to.deep.equal(['a', 'b', 'a', 'b', 'a']);
  });

  it('shuffle, run once: every test case exactly once, in a random order', () => {
    const cases = ['a', 'b', 'c', 'd', 'e'];
    const orders = new Set<string>();
    for (let seed = 0; seed < 20; seed++) {
      const out = [...schedule(cases, { forever: false, shuffle: true, weights: [1, 1, 1, 1, 1], rng: rng(seed) })];
      expect([...out].sort()).to.deep.equal(cases);
      orders.add(out.join(''));
    }
    expect(orders.size).to.be.greaterThan(5);
  });

  it('shuffle: "random order, weighted towards running faster test cases more often"', () => {
    const weights = speedWeights([1, 10]); // fast takes 1 s, slow 10 s
    const it = schedule(['fast', 'slow'], { forever: true, shuffle: true, weights, rng: rng(7) });
    const counts = { fast: 0, slow: 0 } as Record<string, number>;
    for (const t of take(it, 2000)) counts[t]!++;
    expect(counts.fast! / counts.slow!).to.be.within(7, 13); // expected 10
  });

  it('a test case with no history weighs as the mean of the known ones', () => {
    const [a, b, c] = speedWeights([2, 4, undefined]);
    expect(c).to.be.closeTo(1 / 3, 1e-9);
    expect(a).to.be.greaterThan(b!);
    expect(speedWeights([undefined, undefined])).to.deep.equal([1, 1]);
  });

  it('weightedIndex draws in proportion to the weights', () => {
    const r = rng(3);
    const n = [0, 0, 0];
    for (let i = 0; i < 6000; i++) n[weightedIndex([1, 2, 3], r)]!++;
    expect(n[2]! / n[0]!).to.be.within(2.5, 3.5);
  });
});
