import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { checkCategory, parseRunRequest } from '../../src/core/runRequest.js';

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
    const r = parseRunRequest(base, 'v1');
    expect(r).to.deep.include({ category: 'default', soak: 'run once', shuffle: false, remote_control: null, tags: {} });
  });

  it('requires test_pack_revision and a non-empty test_cases array of <file>::<function> names', () => {
    expect(codeOf(() => parseRunRequest({ test_cases: base.test_cases }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, test_pack_revision: 5 }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, test_cases: 'tests/a.py::test_one' }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, test_cases: [] }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, test_cases: ['tests/a.py'] }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, test_cases: [3] }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest([base], 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest(null, 'v1'))).to.equal('invalid_request');
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
    expect(parseRunRequest({ ...base, soak: 'run forever' }, 'v1').soak).to.equal('run forever');
    expect(codeOf(() => parseRunRequest({ ...base, soak: 'forever' }, 'v1'))).to.equal('invalid_request');
    expect(parseRunRequest({ ...base, shuffle: true }, 'v1').shuffle).to.equal(true);
    expect(codeOf(() => parseRunRequest({ ...base, shuffle: 'yes' }, 'v1'))).to.equal('invalid_request');
  });

  it('v1 has no tags; v2 accepts tag names with "/" and "." (COMPAT: jenkins/BUILD_ID, bamboo.buildPlanName)', () => {
    expect(parseRunRequest({ ...base, tags: { a: 'b' } }, 'v1').tags).to.deep.equal({});
    const tags = { 'jenkins/BUILD_ID': '42', 'bamboo.buildPlanName': 'plan' };
    expect(parseRunRequest({ ...base, tags }, 'v2').tags).to.deep.equal(tags);
  });

  it('refuses tag names COMPAT.md forbids and non-string or long values', () => {
    for (const name of [' ', 'a:b', 'a=b', 'a$', '<a', 'a>', 'a\nb', '/a', '-a', '.a', '_a', 'x'.repeat(500)]) {
      expect(codeOf(() => parseRunRequest({ ...base, tags: { [name]: 'v' } }, 'v2')), name).to.equal('invalid_request');
    }
    expect(codeOf(() => parseRunRequest({ ...base, tags: { a: 1 } }, 'v2'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, tags: { a: 'v'.repeat(500) } }, 'v2'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, tags: ['a'] }, 'v2'))).to.equal('invalid_request');
  });

  it('remote_control is a file name without suffix, never a path', () => {
    expect(parseRunRequest({ ...base, remote_control: 'vstb' }, 'v1').remote_control).to.equal('vstb');
    expect(codeOf(() => parseRunRequest({ ...base, remote_control: '../x' }, 'v1'))).to.equal('invalid_request');
    expect(codeOf(() => parseRunRequest({ ...base, remote_control: 7 }, 'v1'))).to.equal('invalid_request');
  });
});
