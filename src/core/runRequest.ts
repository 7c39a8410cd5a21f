/**
 * A run_tests request, shared by v1 and v2 (v2 adds node_id and tags). The body's shape (an object, a
 * revision, 1 to MAX_TEST_CASES names of the form <file>::<function>, soak, shuffle, remote_control, a
 * category without the characters the spec forbids) is checked before the handler runs, by the route's
 * schema in the table of endpoints (src/http/openapi/schemas.ts `V1RunTestsRequest`, `V2RunTestsRequest`),
 * with the messages below. What is left here: a v2 tag's rules (the message names the tag) and the defaults.
 */
import { invalid } from './errors.js';
import type { Soak } from './model.js';

export interface RunRequest {
  test_pack_revision: string;
  test_cases: string[];
  category: string;
  soak: Soak;
  shuffle: boolean;
  remote_control: string | null;
  tags: Record<string, string>;
}

/** A body the route's schema has accepted. */
export interface RunTestsBody {
  test_pack_revision: string;
  test_cases: string[];
  category?: string | null;
  soak?: Soak | null;
  shuffle?: boolean | null;
  remote_control?: string | null;
  tags?: unknown;
}

export const MAX_TEST_CASES = 10_000;

/** The messages of the shape's rules, one per field, as the schemas give them (the first problem found is answered). */
export const RUN_TESTS_MESSAGES = {
  body: 'the request body must be a JSON object',
  revision: 'test_pack_revision is required: a commit SHA, branch, tag or ref name (string)',
  testCases: `test_cases is required: an array of 1 to ${MAX_TEST_CASES} test case names`,
  testCase: (c: unknown) => `test_cases: ${JSON.stringify(c)} is not a test case name of the form <file>::<function>`,
  soak: 'soak must be "run once" or "run forever"',
  shuffle: 'shuffle must be true or false',
  remoteControl: 'remote_control must be the name of a file config/remote-control/<name>.lircd.conf in the test pack, without the suffix',
} as const;

/** A run_tests body the route's schema accepted, as a RunRequest. `version` decides whether `tags` are accepted. */
export function parseRunRequest(b: RunTestsBody, version: 'v1' | 'v2'): RunRequest {
  return {
    test_pack_revision: b.test_pack_revision,
    test_cases: b.test_cases,
    category: b.category ?? 'default',
    soak: b.soak ?? 'run once',
    shuffle: b.shuffle ?? false,
    remote_control: b.remote_control ?? null,
    tags: version === 'v2' ? parseTags(b.tags) : {},
  };
}

/**
 * Spec: "Valid UTF-8; must not be empty; must not contain `/`, newline, `:`,
 * NUL, `$` or any control character; must not start with `.` or `-`."
 */
export function checkCategory(v: unknown): string {
  const problem = categoryProblem(v);
  if (problem) throw invalid(problem, { field: 'category' });
  return v as string;
}

/** What is wrong with a category, naming the character it must not contain; undefined when it is good. */
export function categoryProblem(v: unknown): string | undefined {
  if (typeof v !== 'string') return 'category must be a string';
  if (v.length === 0) return 'category must not be empty';
  if (!v.isWellFormed()) return 'category must be valid UTF-8';
  const bad = /[/:$\p{Cc}]/u.exec(v);
  if (bad) return `category must not contain ${describeChar(bad[0])}; choose a name without it`;
  if (v.startsWith('.') || v.startsWith('-')) return 'category must not start with "." or "-"';
  return undefined;
}

/** COMPAT.md: names not blank, < 500 chars, no `:` `=` `$` `<` `>` or control characters, not starting with `/` `-` `.` `_`. */
function parseTags(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid('tags must be an object of name to string value');
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(v)) {
    if (name.trim() === '' || name.length >= 500 || /[:=$<>\p{Cc}]/u.test(name) || /^[/\-._]/.test(name)) {
      throw invalid(
        `tags: ${JSON.stringify(name)} is not a valid tag name (not blank, under 500 characters, no : = $ < > or control characters, not starting with / - . _)`,
      );
    }
    if (typeof value !== 'string' || value.length >= 500) {
      throw invalid(`tags: the value of ${JSON.stringify(name)} must be a string under 500 characters`);
    }
    out[name] = value;
  }
  return out;
}

function describeChar(c: string): string {
  const names: Record<string, string> = { '/': '"/"', ':': '":"', $: '"$"', '\n': 'a newline', '\0': 'NUL' };
  return names[c] ?? `the control character U+${c.codePointAt(0)!.toString(16).padStart(4, '0').toUpperCase()}`;
}
