import { expect } from 'chai';
import { isTestFile, testCaseNamesOf, topLevelTestFunctions } from '../../src/runner/discovery.js';

describe('runner: test-case discovery', () => {
  it('lists top-level "def test_*(" functions, async def too, in source order', () => {
    const src = ['import x', 'def test_one():', '    pass', 'async def test_two(a=1):', '    pass', 'def test_three (', '  ):', '    pass', ''].join('\n');
    expect(topLevelTestFunctions(src)).to.deep.equal(['test_one', 'test_two', 'test_three']);
  });

  it('does not list indented defs: class methods, nested functions, defs under if', () => {
    const src = [
      'class TestMenu:',
      '    def test_method(self):',
      '        pass',
      'def helper():',
      '    def test_nested():',
      '        pass',
      'if True:',
      '\tdef test_tabbed():',
      '\t\tpass',
      '',
    ].join('\n');
    expect(topLevelTestFunctions(src)).to.deep.equal([]);
  });

  it('needs the test_ prefix: "def test(" and "def testing(" are not test cases', () => {
    expect(topLevelTestFunctions('def test():\n  pass\ndef testing():\n  pass\ndef _test_x():\n  pass\n')).to.deep.equal([]);
  });

  it('ignores defs inside docstrings, other strings and comments', () => {
    const src = [
      '"""Module docstring.',
      'def test_in_docstring():',
      '"""',
      "x = '''",
      'def test_in_single_quoted_triple():',
      "'''",
      's = "not a \\" string end"; t = \'def test_inline():\'',
      '# def test_commented():',
      'y = """ends here""" ; z = 1',
      'def test_real():',
      '    """def test_in_function_docstring():"""',
      "r = r'\\'' ; b = b\"x\"",
      'def test_after_raw_string():',
      '    pass',
    ].join('\n');
    expect(topLevelTestFunctions(src)).to.deep.equal(['test_real', 'test_after_raw_string']);
  });

  it('copes with CRLF line ends, a byte-order mark, non-ASCII names and duplicates', () => {
    const src = '\ufeffdef test_first():\r\n    pass\r\ndef test_caf\u00e9():\r\n    pass\r\ndef test_first():\r\n    pass\r\n';
    expect(topLevelTestFunctions(src)).to.deep.equal(['test_first', 'test_caf\u00e9']);
  });

  it('an unterminated string does not hide the rest of the file', () => {
    expect(topLevelTestFunctions('x = "oops\ndef test_after():\n    pass\n')).to.deep.equal(['test_after']);
  });

  it('test cases come from tests/**/*.py only, named tests/path/file.py::test_name, sorted', () => {
    const files = [
      { path: 'tests/z.py', source: 'def test_b():\n  pass\ndef test_a():\n  pass\n' },
      { path: 'tests/deep/er/nested.py', source: 'def test_deep():\n  pass\n' },
      { path: 'tests/a.py', source: 'async def test_async():\n  pass\n' },
      { path: 'tests/readme.txt', source: 'def test_not_python():\n' },
      { path: 'lib/test_helpers.py', source: 'def test_outside_tests():\n  pass\n' },
      { path: 'test_root.py', source: 'def test_root():\n  pass\n' },
    ];
    expect(testCaseNamesOf(files)).to.deep.equal([
      'tests/a.py::test_async',
      'tests/deep/er/nested.py::test_deep',
      'tests/z.py::test_a',
      'tests/z.py::test_b',
    ]);
    expect(isTestFile('tests/x.py')).to.equal(true);
    expect(isTestFile('tests/x.pyc')).to.equal(false);
    expect(isTestFile('testsx/x.py')).to.equal(false);
  });
});
