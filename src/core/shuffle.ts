/**
 * The order test cases run in. `shuffle: true` is "random order, weighted
 * towards running faster test cases more often": each draw picks a test case
 * with probability proportional to 1 / its mean past duration. A test case
 * that never ran gets the mean of the known ones (or 1 s when none is known),
 * so it is neither starved nor favoured.
 */

export type Rng = () => number;

/** Weights 1/duration; unknown durations take the mean of the known ones. */
export function speedWeights(durations: (number | undefined)[]): number[] {
  const known = durations.filter((d): d is number => d !== undefined && d > 0);
  const fallback = known.length ? known.reduce((a, b) => a + b, 0) / known.length : 1;
  // A floor of 0.1 s keeps one instant test from taking every draw.
  return durations.map((d) => 1 / Math.max(0.1, d !== undefined && d > 0 ? d : fallback));
}

/** Index drawn with probability proportional to its weight. */
export function weightedIndex(weights: number[], rng: Rng): number {
  const total = weights.reduce((a, b) => a + b, 0);
  let r = rng() * total;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return weights.length - 1;
}

/**
 * An endless or finite sequence of test cases for a job:
 * - run once, in order: each test case once, as given;
 * - run once, shuffled: a weighted random permutation (faster ones tend to come first);
 * - run forever, in order: the list, again and again;
 * - run forever, shuffled: independent weighted draws, so faster ones run more often.
 */
export function* schedule(
  testCases: string[],
  opts: { forever: boolean; shuffle: boolean; weights: number[]; rng: Rng },
): Generator<string> {
  if (!opts.shuffle) {
    do yield* testCases;
    while (opts.forever);
    return;
  }
  if (opts.forever) {
    for (;;) yield testCases[weightedIndex(opts.weights, opts.rng)]!;
  }
  const left = testCases.map((t, i) => ({ t, w: opts.weights[i]! }));
  while (left.length) {
    const i = weightedIndex(
      left.map((x) => x.w),
      opts.rng,
    );
    yield left.splice(i, 1)[0]!.t;
  }
}
