// The published OpenAPI document passes third-party validators (issue 21, item 5): Python's
// openapi-spec-validator and @apidevtools/swagger-parser, on the document as GET /api/openapi.json serves it;
// every pattern is within JSON Schema's interoperable regex subset and accepts exactly what the regex zod
// validates with accepts, in JavaScript (as ajv compiles it, `u` flag) and in Python's `re` (docs/openapi.md).
import SwaggerParser from '@apidevtools/swagger-parser';
import Router from '@koa/router';
import { expect } from 'chai';
import Koa from 'koa';
import { execFileSync, spawnSync } from 'node:child_process';
import request from 'supertest';
import type { Services } from '../../src/http/context.js';
import { openApiRouter } from '../../src/http/openapi/routes.js';
import { PATTERNS } from '../../src/http/openapi/patterns.js';

/** The first Python that has openapi-spec-validator: Debian's, else the one on PATH (docs/testing.md). */
function pythonWithValidator(): string {
  for (const py of ['/usr/bin/python3', 'python3']) {
    const r = spawnSync(py, ['-c', 'import openapi_spec_validator'], { stdio: 'ignore' });
    if (r.status === 0) return py;
  }
  throw new Error(
    "Python's openapi-spec-validator is missing: scripts/setup.sh installs it (Debian 13: apt-get install python3-openapi-spec-validator; " +
      'Debian 12: python3 -m pip install openapi-spec-validator). This check does not skip.',
  );
}

/** The document exactly as the node publishes it. */
async function publishedDocument(): Promise<{ text: string; doc: Record<string, unknown> }> {
  const app = new Koa();
  const r: Router = openApiRouter({ version: '1.2.3' } as Services);
  app.use(r.routes());
  const res = await request(app.callback()).get('/api/openapi.json').buffer(true).parse((resp, cb) => {
    let text = '';
    resp.setEncoding('utf8');
    resp.on('data', (c: string) => (text += c));
    resp.on('end', () => cb(null, text));
  });
  expect(res.status).to.equal(200);
  const text = res.body as string;
  return { text, doc: JSON.parse(text) as Record<string, unknown> };
}

/** Every `pattern` of the document, with where it is. */
function patternsOf(v: unknown, at = '#', out: { at: string; pattern: string }[] = []): { at: string; pattern: string }[] {
  if (Array.isArray(v)) v.forEach((x, i) => patternsOf(x, `${at}/${i}`, out));
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === 'pattern' && typeof x === 'string') out.push({ at: `${at}/${k}`, pattern: x });
      else if (k === 'patternProperties' && x && typeof x === 'object') for (const p of Object.keys(x)) out.push({ at: `${at}/${k}`, pattern: p });
      patternsOf(x, `${at}/${k}`, out);
    }
  }
  return out;
}

/**
 * Why a pattern is outside the interoperable subset (json-schema.org, "Regular Expressions"), or null:
 * literal characters, `.`, `^`, `$`, groups `(...)`, `(?!...)`, `(?=...)`, `|`, classes with literal characters
 * and ranges (`[...]`, `[^...]`), the quantifiers `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` (each maybe lazy), and
 * `\` only before a syntax character. No `\d`, `\s`, `\p{..}`, `\uXXXX`, `\0`, `\n`, `(?:`, lookbehind, flags.
 */
export function outsideSubset(p: string): string | null {
  const SYNTAX = '^$\\.*+?()[]{}|/-';
  let depth = 0;
  let i = 0;
  const escape = (): string | null => {
    const c = p[i + 1];
    if (c === undefined) return 'a lone \\ at the end';
    if (!SYNTAX.includes(c)) return `the escape \\${c}`;
    i += 2;
    return null;
  };
  while (i < p.length) {
    const c = p[i]!;
    if (c === '\\') {
      const bad = escape();
      if (bad) return bad;
    } else if (c === '[') {
      i += p[i + 1] === '^' ? 2 : 1;
      let first = true;
      while (p[i] !== ']' || first) {
        if (i >= p.length) return 'an unclosed class';
        if (p[i] === '\\') {
          const bad = escape();
          if (bad) return bad;
        } else if (p[i] === '[') return 'a [ inside a class';
        else i++;
        first = false;
      }
      i++;
    } else if (c === '(') {
      if (p[i + 1] === '?') {
        if (p[i + 2] !== '!' && p[i + 2] !== '=') return `the group (?${p[i + 2] ?? ''}`;
        i += 3;
      } else i++;
      depth++;
    } else if (c === ')') {
      if (--depth < 0) return 'an unmatched )';
      i++;
    } else if (c === '{') {
      const m = /^\{\d+(,\d*)?\}\??/.exec(p.slice(i));
      if (!m) return 'a { that is not a quantifier';
      i += m[0].length;
    } else if ('*+?'.includes(c)) {
      i += p[i + 1] === '?' ? 2 : 1;
    } else if (c === ']' || c === '}') return `an unescaped ${c}`;
    else i++;
  }
  return depth === 0 ? null : 'an unclosed group';
}

/** Characters to try in every position: controls, the space characters, specials of the patterns, some letters, beyond the BMP. */
const CHARS = [
  ...Array.from({ length: 0xa1 }, (_, n) => String.fromCharCode(n)),
  '\u1680', '\u2000', '\u2005', '\u200a', '\u200b', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', '\u00ad', '\u0300',
  'é', 'ß', 'ж', '中', '😀',
];

/** Strings that each pattern accepts, to mutate. */
const GOOD: Record<keyof typeof PATTERNS, string[]> = {
  md5: ['0123456789abcdef0123456789abcdef'],
  testCaseName: ['tests/a.py::test_a', 'x::_'],
  category: ['default', 'nightly build 7'],
  remoteControl: ['vstb', 'Roku.2+x'],
  tagName: ['jenkins/BUILD_ID', 'bamboo.buildPlanName', 'a b'],
  key: ['KEY_OK', 'KEY_VOLUMEUP+1'],
  notBlank: ['x', ' a '],
};

function corpus(good: string[]): string[] {
  const out = new Set<string>(['', ' ', '\n', '\t \u00a0', '\u3000\ufeff']);
  for (const g of good) {
    out.add(g);
    out.add(`${g}\n`);
    out.add(`\n${g}`);
    out.add(`${g}\r\n`);
    for (const c of CHARS) {
      out.add(c);
      out.add(c + c);
      out.add(c + g);
      out.add(g + c);
      out.add(g.slice(0, 1) + c + g.slice(1));
      out.add(`${c} ${g}`);
    }
  }
  return [...out];
}

describe('OpenAPI document: third-party validators and interoperable patterns', function () {
  // One Python child reads the whole corpus; a loaded machine may take a while to start it.
  this.timeout(120_000);
  let published: { text: string; doc: Record<string, unknown> };

  before(async () => {
    published = await publishedDocument();
  });

  it('passes @apidevtools/swagger-parser', async () => {
    const api = await SwaggerParser.validate(structuredClone(published.doc) as never);
    expect((api as { openapi: string }).openapi).to.equal('3.1.0');
  });

  it("passes Python's openapi-spec-validator", () => {
    const py = pythonWithValidator();
    const script = [
      'import json, sys',
      'from openapi_spec_validator import validate',
      'validate(json.loads(sys.stdin.read()))',
      'print("valid")',
    ].join('\n');
    const r = spawnSync(py, ['-c', script], { input: published.text, encoding: 'utf8' });
    expect(r.status, `${py} openapi-spec-validator:\n${r.stderr}`).to.equal(0);
    expect(r.stdout.trim()).to.equal('valid');
  });

  it('every pattern is within the interoperable subset (the checker refuses what the old document had)', () => {
    const found = patternsOf(published.doc);
    expect(found.length).to.be.greaterThan(5);
    for (const { at, pattern } of found) expect(outsideSubset(pattern), `${at}: ${JSON.stringify(pattern)}`).to.equal(null);
    // The document is ASCII: the patterns' control and space characters are written as \u escapes.
    expect(/[^\x20-\x7e]/.test(published.text), 'a character outside printable ASCII in the document text').to.equal(false);
    // The checker itself: what the document used to publish, and the rest of what it refuses.
    for (const bad of ['^[^:=$<>\\p{Cc}]+$', '\\S', '^[^\\0\\n]+$', '[\\u0000-\\u001f]', '(?:a)', '(?<=a)b', '\\d', '[a\\sb]', '(a', 'a)', '[a', 'a{x}'])
      expect(outsideSubset(bad), bad).to.be.a('string');
    for (const good of ['^a$', '[-/._]', '^(?![.-])[^/:$]+$', '(a|b)*?', 'a{1,64}', '\\.\\-\\/', '[\\]]']) expect(outsideSubset(good), good).to.equal(null);
  });

  it('each published pattern accepts exactly what zod`s regex accepts, in JavaScript (u flag, as ajv) and in Python re', () => {
    const py = pythonWithValidator();
    const names = Object.keys(PATTERNS) as (keyof typeof PATTERNS)[];
    const cases = names.map((name) => ({ name, pattern: PATTERNS[name].pattern, strings: corpus(GOOD[name]) }));
    // Python reads the patterns as they stand in the published document (JSON), as a Python tool would.
    const inDocument = new Set(patternsOf(published.doc).map((p) => p.pattern));
    for (const c of cases) expect(inDocument.has(c.pattern), `${c.name} is published`).to.equal(true);
    const script = [
      'import json, re, sys',
      'cases = json.loads(sys.stdin.read())',
      'print(json.dumps([[re.search(c["pattern"], s) is not None for s in c["strings"]] for c in cases]))',
    ].join('\n');
    const out = execFileSync(py, ['-c', script], { input: JSON.stringify(cases), encoding: 'utf8', maxBuffer: 64 << 20 });
    const python = JSON.parse(out) as boolean[][];
    let compared = 0;
    cases.forEach((c, k) => {
      const { regex } = PATTERNS[c.name];
      const js = new RegExp(c.pattern, 'u');
      let accepted = 0;
      c.strings.forEach((s, j) => {
        const want = regex.test(s);
        accepted += want ? 1 : 0;
        expect(js.test(s), `${c.name}: JavaScript on ${JSON.stringify(s)}`).to.equal(want);
        expect(python[k]![j], `${c.name}: Python on ${JSON.stringify(s)}`).to.equal(want);
        compared++;
      });
      // Both sides of each pattern are exercised.
      expect(accepted, `${c.name}: strings accepted`).to.be.greaterThan(0);
      expect(accepted, `${c.name}: strings refused`).to.be.lessThan(c.strings.length);
    });
    expect(compared).to.be.greaterThan(10_000);
  });
});
