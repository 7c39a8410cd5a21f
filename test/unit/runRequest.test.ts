import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { checkCategory, parseRunRequest, type RunTestsBody } from '../../src/core/runRequest.js';
import { endpointOf } from '../../src/http/endpoints/table.js';
import { validateBody } from '../../src/http/endpoints/validate.js';

/** What a node does with a run_tests body: the route's check from the table of endpoints, then the domain's rules. */
function parse(body: unknown, v: 'v1' | 'v2') {
  validateBody(endpointOf('POST', `/api/${v}/run_tests`)!, v === 'v2' && body !== null && typeof body === 'object' && !Array.isArray(body) ? { node_id: 'n', ...body } : body);
  return parseRunRequest(body as RunTestsBody, v);
}
const messageOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  return undefined;
};

const base = { test_pack_revision: 'main', test_cases: ['tests/a.py::test_one'] };

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof FarmError ? e.code : 'not-a-farm-error';
  }
  return undefined;
}

describe('run_tests request validation', () => {
  it('fills the defaults: category "default", soak "run once", shuffle false', () => {
    const r = parse(base, 'v1');
    expect(r).to.deep.include({ category: 'default', soak: 'run once', shuffle: false, remote_control: null, tags: {} });
  });

  it('requires test_pack_revision and a non-empty test_cases array of <file>::<function> names', () => {
    expect(codeOf(() => parse({ test_cases: base.test_cases }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, test_pack_revision: 5 }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, test_cases: 'tests/a.py::test_one' }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, test_cases: [] }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, test_cases: ['tests/a.py'] }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, test_cases: [3] }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse([base], 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse(null, 'v1'))).to.equal('invalid_request');
  });

  describe('category: "Valid UTF-8; must not be empty; must not contain /, newline, :, NUL, $ or any control character; must not start with . or -"', () => {
    for (const ok of ['default', 'nightly build', 'ünïcödé', 'a.b-c_d', 'x.', 'x-']) {
      it(`accepts ${JSON.stringify(ok)}`, () => expect(checkCategory(ok)).to.equal(ok));
    }
    const bad: Array<[string, unknown]> = [
      ['empty', ''],
      ['"/" (COMPAT: clients default to refs/snapshots/<user>)', 'refs/snapshots/alice'],
      ['newline', 'a\nb'],
      [':', 'a:b'],
      ['NUL', 'a\0b'],
      ['$', 'a$b'],
      ['a control character (tab)', 'a\tb'],
      ['a control character (DEL)', 'a\x7fb'],
      ['a control character (C1)', 'a\u0085b'],
      ['a leading "."', '.hidden'],
      ['a leading "-"', '-rf'],
      ['invalid UTF-8 (lone surrogate)', 'a\ud800b'],
      ['a non-string', 42],
    ];
    for (const [what, value] of bad) {
      it(`refuses ${what}`, () => expect(codeOf(() => checkCategory(value))).to.equal('invalid_request'));
    }
    it('says which character is not allowed', () => {
      expect(() => checkCategory('refs/snapshots/x')).to.throw(/"\/"/);
    });
  });

  it('soak is "run once" or "run forever"; shuffle is a bool', () => {
    expect(parse({ ...base, soak: 'run forever' }, 'v1').soak).to.equal('run forever');
    expect(codeOf(() => parse({ ...base, soak: 'forever' }, 'v1'))).to.equal('invalid_request');
    expect(parse({ ...base, shuffle: true }, 'v1').shuffle).to.equal(true);
    expect(codeOf(() => parse({ ...base, shuffle: 'yes' }, 'v1'))).to.equal('invalid_request');
  });

  it('v1 has no tags; v2 accepts tag names with "/" and "." (COMPAT: jenkins/BUILD_ID, bamboo.buildPlanName)', () => {
    expect(parse({ ...base, tags: { a: 'b' } }, 'v1').tags).to.deep.equal({});
    const tags = { 'jenkins/BUILD_ID': '42', 'bamboo.buildPlanName': 'plan' };
    expect(parse({ ...base, tags }, 'v2').tags).to.deep.equal(tags);
  });

  it('refuses tag names COMPAT.md forbids and non-string or long values', () => {
    for (const name of [' ', 'a:b', 'a=b', 'a$', '<a', 'a>', 'a\nb', '/a', '-a', '.a', '_a', 'x'.repeat(500)]) {
      expect(codeOf(() => parse({ ...base, tags: { [name]: 'v' } }, 'v2')), name).to.equal('invalid_request');
    }
    expect(codeOf(() => parse({ ...base, tags: { a: 1 } }, 'v2'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, tags: { a: 'v'.repeat(500) } }, 'v2'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, tags: ['a'] }, 'v2'))).to.equal('invalid_request');
  });

  it('remote_control is a file name without suffix, never a path', () => {
    expect(parse({ ...base, remote_control: 'vstb' }, 'v1').remote_control).to.equal('vstb');
    expect(codeOf(() => parse({ ...base, remote_control: '../x' }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parse({ ...base, remote_control: 7 }, 'v1'))).to.equal('invalid_request');
  });

  it('answers the message of the first problem, in the order and words of the hand validators it replaced', () => {
    const v1 = (b: unknown) => messageOf(() => parse(b, 'v1'));
    expect(v1(null)).to.equal('the request body must be a JSON object');
    expect(v1([base])).to.equal('the request body must be a JSON object');
    expect(v1({ test_cases: [5] })).to.equal('test_pack_revision is required: a commit SHA, branch, tag or ref name (string)');
    expect(v1({ ...base, test_cases: [] })).to.equal('test_cases is required: an array of 1 to 10000 test case names');
    expect(v1({ ...base, test_cases: ['a.py::t', 'nope'], soak: 'x' })).to.equal('test_cases: "nope" is not a test case name of the form <file>::<function>');
    expect(v1({ ...base, category: 'a/b', soak: 'x' })).to.equal('category must not contain "/"; choose a name without it');
    expect(v1({ ...base, category: 'a\u0085' })).to.equal('category must not contain the control character U+0085; choose a name without it');
    expect(v1({ ...base, category: 'a\ud800' })).to.equal('category must be valid UTF-8');
    expect(v1({ ...base, category: '' })).to.equal('category must not be empty');
    expect(v1({ ...base, soak: 'x', shuffle: 'x' })).to.equal('soak must be "run once" or "run forever"');
    expect(v1({ ...base, shuffle: 'x', remote_control: 7 })).to.equal('shuffle must be true or false');
    expect(v1({ ...base, remote_control: 7 })).to.match(/^remote_control must be the name of a file config\/remote-control\/<name>\.lircd\.conf/);
    const v2 = (b: unknown) => messageOf(() => {
      validateBody(endpointOf('POST', '/api/v2/run_tests')!, b);
      return parseRunRequest(b as RunTestsBody, 'v2');
    });
    expect(v2(null)).to.equal('node_id is required (string)');
    expect(v2({ ...base, node_id: 5 })).to.equal('node_id is required (string)');
    expect(v2({ ...base, node_id: 'n', remote_control: '../x', tags: { 'a:b': 'c' } })).to.match(/^remote_control must be/);
    expect(v2({ ...base, node_id: 'n', tags: { 'a:b': 'c' } })).to.match(/^tags: "a:b" is not a valid tag name/);
  });
});
