/**
 * Linear-time matching for the results filter: `*` globs and case-insensitive
 * substrings, without regular expressions.
 *
 * A glob whose only wildcard is `*` splits into literal segments. The first
 * must be a prefix and the last a suffix; each middle one is found at its
 * leftmost place after the previous one (leftmost is always safe: a later
 * place leaves less room for the rest). Each search is Knuth-Morris-Pratt, so
 * the text is scanned forward once: a match costs at most about
 * 2 x (text length + pattern length) character comparisons, whatever the
 * pattern (`*a*a*a*...*b` included). A backtracking regular expression took
 * 38 s on `testcase:************a` and blocked the event loop meanwhile.
 */

/** Counts character comparisons; tests use it to prove the bound. */
export interface StepCounter { steps: number }

/** A compiled literal: its character codes and KMP failure table. */
interface Literal { codes: Uint16Array; fail: Int32Array }

function literal(codes: ArrayLike<number>): Literal {
  const c = Uint16Array.from(codes);
  const fail = new Int32Array(c.length);
  let k = 0;
  for (let i = 1; i < c.length; i++) {
    while (k > 0 && c[i] !== c[k]) k = fail[k - 1]!;
    if (c[i] === c[k]) k++;
    fail[i] = k;
  }
  return { codes: c, fail };
}

const codesOf = (s: string): number[] => Array.from({ length: s.length }, (_, i) => s.charCodeAt(i));

/**
 * The index just after the first occurrence of `lit` in `text[from, to)`, or -1.
 * `fold` maps each text character before comparing (identity or lower case).
 */
function find(lit: Literal, text: string, from: number, to: number, fold: (c: number) => number, n?: StepCounter): number {
  const { codes, fail } = lit;
  const m = codes.length;
  if (m === 0) return from;
  let k = 0;
  for (let i = from; i < to; i++) {
    const c = fold(text.charCodeAt(i));
    while (k > 0 && c !== codes[k]) {
      if (n) n.steps++;
      k = fail[k - 1]!;
    }
    if (n) n.steps++;
    if (c === codes[k] && ++k === m) return i + 1;
  }
  return -1;
}

const same = (c: number): number => c;

/** A matcher for a `*` glob that must match the whole text (`tests/*::test_x*`). */
export function compileGlob(pattern: string): (text: string, n?: StepCounter) => boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return (text) => text === pattern;
  const head = parts[0]!;
  const tail = parts[parts.length - 1]!;
  // Consecutive stars leave empty middle segments: they match anywhere, so drop them.
  const middle = parts.slice(1, -1).filter((p) => p !== '').map((p) => literal(codesOf(p)));
  const minLength = parts.reduce((sum, p) => sum + p.length, 0);
  return (text, n) => {
    if (text.length < minLength) return false;
    if (n) n.steps += head.length + tail.length;
    if (!text.startsWith(head) || !text.endsWith(tail)) return false;
    let at = head.length;
    const end = text.length - tail.length;
    for (const lit of middle) {
      at = find(lit, text, at, end, same, n);
      if (at < 0) return false;
    }
    return true;
  };
}

/** Lower case of one UTF-16 code unit: ASCII by arithmetic, the rest through String#toLowerCase (cached). */
const lowerCache = new Map<number, number>();
export function lowerCode(c: number): number {
  if (c < 128) return c >= 65 && c <= 90 ? c + 32 : c;
  let l = lowerCache.get(c);
  if (l === undefined) {
    const s = String.fromCharCode(c).toLowerCase();
    // A character whose lower case is longer than one unit (rare) is compared as it is.
    l = s.length === 1 ? s.charCodeAt(0) : c;
    if (lowerCache.size < 65_536) lowerCache.set(c, l);
  }
  return l;
}

/** A case-insensitive substring test, linear in the text. */
export function compileSubstring(needle: string): (text: string, n?: StepCounter) => boolean {
  const lit = literal(codesOf(needle).map(lowerCode));
  return (text, n) => text.length >= lit.codes.length && find(lit, text, 0, text.length, lowerCode, n) >= 0;
}
