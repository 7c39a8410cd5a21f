/**
 * The test pack's INI configuration (`config/stbt.conf` and friends), read
 * the way Python reads it: `configparser.ConfigParser(interpolation=None)`
 * with its other options at their defaults, which is what test packs written
 * for stb-tester were tested against (docs/test-scripts.md, "Configuration"):
 *
 * - `key = value` and `key: value` (the first `=` or `:` splits); spaces
 *   around key and value are dropped; keys are lower-cased, section names
 *   keep their case.
 * - Full-line comments start with `#` or `;` (after any indentation). There
 *   are no inline comments: `a = b ; c` is `b ; c`.
 * - A line indented deeper than its key's line continues the value (joined
 *   with newlines); empty lines inside a value are kept, trailing ones
 *   dropped.
 * - `[DEFAULT]` holds defaults every section inherits; no interpolation.
 *
 * Where configparser would refuse the file (a line that is neither section,
 * option nor comment; options before the first section; a section or option
 * given twice), farmhand reads it anyway, as configparser does with
 * `strict=False` and bad lines skipped, and reports each problem to
 * `onProblem`: one typo must not stop every run, but it must be seen.
 */
import type { IniConfig } from '../core/ports.js';

/** Python's `str.isspace()` characters: what `str.strip()` removes and `\s` matches. */
const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const LEADING = new RegExp(`^[${PY_SPACE}]+`);
const TRAILING = new RegExp(`[${PY_SPACE}]+$`);
const pyStrip = (s: string): string => s.replace(LEADING, '').replace(TRAILING, '');
const pyRstrip = (s: string): string => s.replace(TRAILING, '');
/** configparser's SECTCRE: `[` then the longest run up to the last `]` of the line. */
const SECTION = /^\[(.+)\]/s;
/** configparser's OPTCRE: the shortest key before the first `=` or `:`, then the value. */
const OPTION = new RegExp(`^(.*?)[${PY_SPACE}]*([=:])[${PY_SPACE}]*(.*)$`, 's');
const NON_SPACE = new RegExp(`[^${PY_SPACE}]`);
const DEFAULT_SECTION = 'DEFAULT';

export interface IniProblem {
  line: number;
  message: string;
}

/**
 * Parse INI text into `{ section: { key: value } }`. Every section carries the
 * `[DEFAULT]` values it does not set itself; `DEFAULT` is present when it has any.
 */
export function parseIniConfig(text: string, onProblem?: (p: IniProblem) => void): IniConfig {
  const problem = (line: number, message: string) => onProblem?.({ line, message });
  const defaults: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  const sections = new Map<string, Record<string, string[]>>();
  const seenSections = new Set<string>();
  const seenOptions = new Set<string>();
  let current: Record<string, string[]> | undefined;
  let sectionName = '';
  let option: string | undefined;
  let indentLevel = 0;
  let skippingPreamble = false;

  // Python reads files with universal newlines: \n, \r\n and \r all end a line. A UTF-8
  // byte-order mark is dropped (Python would take it for text before the first section).
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  lines.forEach((line, i) => {
    const lineNo = i + 1;
    const stripped = pyStrip(line);
    const isComment = stripped.startsWith('#') || stripped.startsWith(';');
    const value = isComment ? '' : stripped;
    if (value === '') {
      // An empty line inside a value is part of it (empty_lines_in_values); a comment line is not.
      if (!isComment && current && option !== undefined) current[option]!.push('');
      return;
    }
    const indent = line.search(NON_SPACE);
    if (current && option !== undefined && indent > indentLevel) {
      current[option]!.push(value);
      return;
    }
    indentLevel = indent;
    const header = SECTION.exec(value);
    if (header) {
      sectionName = header[1]!;
      if (sectionName === DEFAULT_SECTION) {
        current = defaults;
      } else {
        if (seenSections.has(sectionName)) problem(lineNo, `section [${sectionName}] is given twice (Python's configparser refuses the file); its keys are merged`);
        seenSections.add(sectionName);
        current = sections.get(sectionName);
        if (!current) sections.set(sectionName, (current = Object.create(null) as Record<string, string[]>));
      }
      option = undefined;
      return;
    }
    if (!current) {
      if (!skippingPreamble) problem(lineNo, 'text before the first [section] (Python\'s configparser refuses the file); ignored up to the first section');
      skippingPreamble = true;
      return;
    }
    const m = OPTION.exec(value);
    if (!m || m[1] === '') {
      problem(lineNo, `not a "key = value" or "key: value" line, a [section] or a comment (Python's configparser refuses the file); ignored: ${JSON.stringify(value.slice(0, 80))}`);
      return;
    }
    option = pyRstrip(m[1]!).toLowerCase();
    const id = `${sectionName}\u0000${option}`;
    if (seenOptions.has(id)) problem(lineNo, `key "${option}" is given twice in [${sectionName}] (Python's configparser refuses the file); the last value counts`);
    seenOptions.add(id);
    current[option] = [pyStrip(m[3]!)];
  });

  const join = (lines: string[]): string => pyRstrip(lines.join('\n'));
  const out: IniConfig = Object.create(null) as IniConfig;
  const flatDefaults = Object.fromEntries(Object.entries(defaults).map(([k, v]) => [k, join(v)]));
  if (Object.keys(flatDefaults).length > 0) out[DEFAULT_SECTION] = { ...flatDefaults };
  for (const [name, options] of sections) {
    const own = Object.fromEntries(Object.entries(options).map(([k, v]) => [k, join(v)]));
    out[name] = Object.assign(Object.create(null) as Record<string, string>, flatDefaults, own);
  }
  return out;
}
