/**
 * Numbers for benchmark reports: median and p90 of a sample, and a tally of
 * targets that prints each one with a PASS or MISS mark, so a reader sees at
 * once which targets hold on this machine.
 */

/** A sample's size and order statistics. */
export interface Summary {
  n: number;
  median: number;
  p90: number;
  min: number;
  max: number;
}

/** Nearest-rank percentile (p in 0..100) of a non-empty sample. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) throw new Error('percentile of an empty sample');
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[rank - 1]!;
}

/** Median (the lower one for an even count, as nearest rank gives), p90, min and max. */
export function summarize(xs: readonly number[]): Summary {
  return {
    n: xs.length,
    median: percentile(xs, 50),
    p90: percentile(xs, 90),
    min: Math.min(...xs),
    max: Math.max(...xs),
  };
}

/** `median 12.3 ms  p90 15.0 ms  max 20.1 ms  (n=30)` */
export function formatSummary(s: Summary, unit: string, digits = 1): string {
  const f = (x: number) => `${x.toFixed(digits)} ${unit}`;
  return `median ${f(s.median)}  p90 ${f(s.p90)}  min ${f(s.min)}  max ${f(s.max)}  (n=${s.n})`;
}

/** One target: a measured value against a limit. */
export interface TargetCheck {
  label: string;
  value: number;
  op: '<=' | '>=';
  limit: number;
  unit: string;
  pass: boolean;
}

/** Collects targets as they are measured and prints each with its mark. */
export class Targets {
  readonly checks: TargetCheck[] = [];

  constructor(private readonly out: (line: string) => void = console.log) {}

  /**
   * Record and print `PASS`/`MISS  label: detail  [target: value op limit unit]`.
   * `value` is what the target is judged on (a median, a ratio, a peak).
   */
  check(label: string, value: number, op: '<=' | '>=', limit: number, unit: string, detail: string): boolean {
    const pass = op === '<=' ? value <= limit : value >= limit;
    this.checks.push({ label, value, op, limit, unit, pass });
    const shown = `${Number.isInteger(value) ? value : value.toFixed(2)}${unit ? ' ' + unit : ''}`;
    this.out(`${pass ? 'PASS' : 'MISS'}  ${label}: ${detail}  [target ${shown} ${op} ${limit}${unit ? ' ' + unit : ''}]`);
    return pass;
  }

  get missed(): TargetCheck[] {
    return this.checks.filter((c) => !c.pass);
  }

  /** A closing table of every target. */
  printSummary(): void {
    this.out(`\n${this.checks.length - this.missed.length} of ${this.checks.length} targets met:`);
    for (const c of this.checks) {
      const v = Number.isInteger(c.value) ? String(c.value) : c.value.toFixed(2);
      // The ratio to the target: under 1 is inside a '<=' target, over 1 inside a '>=' one (machines differ; ratios compare).
      const ratio = c.limit === 0 ? '' : `  (${(c.value / c.limit).toFixed(2)}x the target)`;
      this.out(`  ${c.pass ? 'PASS' : 'MISS'}  ${c.label.padEnd(52)} ${v.padStart(8)} ${c.op} ${c.limit} ${c.unit}${ratio}`);
    }
  }
}
