/**
 * The string patterns of the document's schemas, each twice: `regex`, what
 * zod checks with (ECMAScript, with the `u` flag where the server's own check
 * uses a Unicode property), and `pattern`, the same set of strings written in
 * JSON Schema's interoperable regex subset for the published document
 * (docs/openapi.md "Patterns"): literal characters and ranges in classes,
 * `^`, `$`, groups, `|`, quantifiers and lookahead; no `\p{...}`, no `\s`,
 * `\d`, `\0`, `\n` or `\uXXXX` escapes, no flags. Tools outside JavaScript
 * (Python's `re` under openapi-spec-validator, code generators) read the
 * pattern; test/unit/openapi-validators.test.ts checks that each pattern
 * accepts exactly what its regex accepts, in JavaScript and in Python.
 */

/** ECMAScript's `\s` (WhiteSpace and LineTerminator), as literal characters for a class. */
const SPACE = '\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff';
/** Unicode's Cc (control) characters, `\p{Cc}`: C0, DEL and C1, as a literal range for a class. */
const CONTROL = '\u0000-\u001f\u007f-\u009f';

/**
 * `^<body>$` for every engine: Python's `$` also matches before a final newline, so an anchored
 * pattern starts by refusing a newline anywhere (none of these accepts one).
 */
const whole = (body: string): string => `^(?![^\n]*\n)${body}$`;

export interface DualPattern {
  /** What zod validates with. */
  regex: RegExp;
  /** The interoperable pattern the document publishes for it. */
  pattern: string;
}

export const PATTERNS = {
  /** An artifact's md5: 32 lowercase hex digits. */
  md5: { regex: /^[0-9a-f]{32}$/, pattern: whole('[0-9a-f]{32}') },
  /** `<file>::<function>`. */
  testCaseName: { regex: /^[^\0\n]+::[A-Za-z_][A-Za-z0-9_]*$/, pattern: whole('[^\u0000\n]+::[A-Za-z_][A-Za-z0-9_]*') },
  /** run_tests' category (core/runRequest.ts): not empty; no `/`, `:`, `$` or control characters; not starting with `.` or `-`. */
  // eslint-disable-next-line no-control-regex
  category: { regex: /^(?![.-])[^/:$\u0000-\u001f\u007f-\u009f]+$/, pattern: whole(`(?![-.])[^/:$${CONTROL}]+`) },
  /** A remote control's name. */
  remoteControl: { regex: /^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/, pattern: whole('[A-Za-z0-9][-A-Za-z0-9._+]{0,127}') },
  /** A v2 tag's name (core/runRequest.ts): not blank; no `:`, `=`, `$`, `<`, `>` or control characters; not starting with `/`, `-`, `.` or `_`. */
  tagName: { regex: /^(?![/\-._])(?!\s*$)[^:=$<>\p{Cc}]+$/u, pattern: whole(`(?![-/._])(?![${SPACE}]*$)[^:=$<>${CONTROL}]+`) },
  /** A remote control key's name. */
  key: { regex: /^[A-Za-z0-9_+.-]{1,64}$/, pattern: whole('[-A-Za-z0-9_+.]{1,64}') },
  /** Not blank: a character other than white space. */
  notBlank: { regex: /\S/, pattern: `[^${SPACE}]` },
} satisfies Record<string, DualPattern>;
