/**
 * Validation of a run_tests request body, shared by v1 and v2 (v2 adds
 * node_id and tags). Every rule of the spec, with a message that says what to
 * change; the first problem found is reported.
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

const MAX_TEST_CASES = 10_000;

/** Parse a run_tests body. `version` decides whether `tags` are accepted. */
export function parseRunRequest(body: unknown, version: 'v1' | 'v2'): RunRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('the request body must be a JSON object');
  }
  const b = body as Record<string, unknown>;
  const revision = b.test_pack_revision;
  if (typeof revision !== 'string' || revision.length === 0 || revision.length > 256) {
    throw invalid('test_pack_revision is required: a commit SHA, branch, tag or ref name (string)');
  }
  const cases = b.test_cases;
  if (!Array.isArray(cases) || cases.length === 0 || cases.length > MAX_TEST_CASES) {
    throw invalid(`test_cases is required: an array of 1 to ${MAX_TEST_CASES} test case names`);
  }
  for (const c of cases) {
    if (typeof c !== 'string' || !/^[^\0\n]+::[A-Za-z_][A-Za-z0-9_]*$/.test(c)) {
      throw invalid(`test_cases: ${JSON.stringify(c)} is not a test case name of the form <file>::<function>`);
    }
  }
  return {
    test_pack_revision: revision,
    test_cases: cases as string[],
    category: b.category === undefined || b.category === null ? 'default' : checkCategory(b.category),
    soak: parseSoak(b.soak),
    shuffle: parseShuffle(b.shuffle),
    remote_control: parseRemote(b.remote_control),
    tags: version === 'v2' ? parseTags(b.tags) : {},
  };
}

/**
 * Spec: "Valid UTF-8; must not be empty; must not contain `/`, newline, `:`,
 * NUL, `$` or any control character; must not start with `.` or `-`."
 */
export function checkCategory(v: unknown): string {
  if (typeof v !== 'string') throw invalid('category must be a string');
  if (v.length === 0) throw invalid('category must not be empty');
  if (!v.isWellFormed()) throw invalid('category must be valid UTF-8');
  const bad = /[/:$\p{Cc}]/u.exec(v);
  if (bad) {
    throw invalid(`category must not contain ${describeChar(bad[0])}; choose a name without it`, {
      field: 'category',
    });
  }
  if (v.startsWith('.') || v.startsWith('-')) throw invalid('category must not start with "." or "-"');
  return v;
}

function parseSoak(v: unknown): Soak {
  if (v === undefined || v === null) return 'run once';
  if (v === 'run once' || v === 'run forever') return v;
  throw invalid('soak must be "run once" or "run forever"');
}

function parseShuffle(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  throw invalid('shuffle must be true or false');
}

function parseRemote(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/.test(v)) {
    throw invalid(
      'remote_control must be the name of a file config/remote-control/<name>.lircd.conf in the test pack, without the suffix',
    );
  }
  return v;
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
