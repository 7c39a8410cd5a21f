/**
 * Test-case discovery without running Python: a test case is a top-level
 * `def test_*(` (or `async def`) in `tests/**\/*.py`. The scanner skips
 * comments and string literals, so a `def test_x():` written inside a
 * docstring is not taken for a function; anything indented (methods, nested
 * functions, defs under `if`) is not top-level and is not listed.
 */

const TOP_LEVEL_DEF = /(?:async[ \t]+)?def[ \t]+(test_\p{ID_Continue}*)[ \t]*\(/uy;

/** Whether a path in the test pack is a file test cases are collected from. */
export function isTestFile(path: string): boolean {
  return path.startsWith('tests/') && path.endsWith('.py');
}

/** Names of the top-level `test_*` functions of a Python source, in source order, each once. */
export function topLevelTestFunctions(source: string): string[] {
  const src = source.startsWith('\ufeff') ? source.slice(1) : source;
  const names = new Set<string>();
  let atLineStart = true;
  let i = 0;
  while (i < src.length) {
    if (atLineStart) {
      TOP_LEVEL_DEF.lastIndex = i;
      const m = TOP_LEVEL_DEF.exec(src);
      if (m?.[1]) names.add(m[1]);
      atLineStart = false;
    }
    const c = src[i];
    if (c === '\n') {
      atLineStart = true;
      i++;
    } else if (c === '#') {
      const eol = src.indexOf('\n', i);
      i = eol < 0 ? src.length : eol;
    } else if (c === '"' || c === "'") {
      i = endOfString(src, i);
    } else {
      i++;
    }
  }
  return [...names];
}

/**
 * Index just past the string literal whose opening quote is at `start`.
 * String prefixes (r, b, f) need no care: in every kind, a backslash keeps
 * the next character from closing the string.
 */
function endOfString(src: string, start: number): number {
  const q = src[start] as string;
  const triple = src.startsWith(q + q + q, start);
  let j = start + (triple ? 3 : 1);
  while (j < src.length) {
    const c = src[j];
    if (c === '\\') j += 2;
    else if (triple && src.startsWith(q + q + q, j)) return j + 3;
    else if (!triple && c === q) return j + 1;
    else if (!triple && c === '\n') return j; // unterminated: Python would refuse it; resume at the newline
    else j++;
  }
  return src.length;
}

/** `path::name` for every test function of the given test files, sorted, each once. */
export function testCaseNamesOf(files: Iterable<{ path: string; source: string }>): string[] {
  const out = new Set<string>();
  for (const f of files) {
    if (!isTestFile(f.path)) continue;
    for (const name of topLevelTestFunctions(f.source)) out.add(`${f.path}::${name}`);
  }
  return [...out].sort();
}
