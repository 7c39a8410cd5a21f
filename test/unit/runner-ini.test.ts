/**
 * The test pack's INI file, read with Python configparser semantics
 * (`ConfigParser(interpolation=None)`, the other options at their defaults).
 * The differential test runs the real /usr/bin/python3 configparser on a
 * corpus of tricky files and compares every section and value.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { parseIniConfig, type IniProblem } from '../../src/runner/iniConfig.js';

const parse = (text: string) => {
  const problems: IniProblem[] = [];
  const config = parseIniConfig(text, (p) => problems.push(p));
  return { config: JSON.parse(JSON.stringify(config)) as Record<string, Record<string, string>>, problems };
};

describe('runner: test-pack INI configuration', () => {
  it('reads sections of string values; keys are written section.key', () => {
    const { config, problems } = parse('# comment\n; other comment\n[test_pack]\ndefault_remote_control = vstb\ntest_timeout_secs=600\n\n[global]\nverbose = 1\n');
    expect(config).to.deep.equal({ test_pack: { default_remote_control: 'vstb', test_timeout_secs: '600' }, global: { verbose: '1' } });
    expect(problems).to.deep.equal([]);
  });

  it('issue 11: "key: value" sets key (it used to become a key named "key: value")', () => {
    expect(parse('[test_pack]\ndefault_remote_control: vstb\n').config).to.deep.equal({ test_pack: { default_remote_control: 'vstb' } });
  });

  it('no inline comments (configparser default): "a = b ; c" is "b ; c"; # and ; start comments only at the start of a line', () => {
    expect(parse('[s]\nurl = http://host/#x\na = b ; c\n  # an indented comment\n').config).to.deep.equal({ s: { url: 'http://host/#x', a: 'b ; c' } });
  });

  it('keys are lower-cased, section names keep their case; no interpolation; true/false/null stay strings', () => {
    expect(parse('[Test_Pack]\nDefault_Remote = vstb\npct = 100%\nref = %(pct)s\nb = true\nn = null\n').config).to.deep.equal({
      Test_Pack: { default_remote: 'vstb', pct: '100%', ref: '%(pct)s', b: 'true', n: 'null' },
    });
  });

  it('indented lines continue a value; [DEFAULT] values reach every section; dotted names stay whole', () => {
    const { config } = parse('[DEFAULT]\nshared = 1\n[a.b]\nlist = one\n  two\n\n  three\nk = v\n[c]\nshared = 2\n');
    expect(config).to.deep.equal({ DEFAULT: { shared: '1' }, 'a.b': { shared: '1', list: 'one\ntwo\n\nthree', k: 'v' }, c: { shared: '2' } });
  });

  it('what Python would refuse is read as far as it can be, and every problem is reported with its line', () => {
    const { config, problems } = parse('stray = 1\n[s]\nk = a\nk = b\nno delimiter here\n[s]\nj = c\n');
    expect(config).to.deep.equal({ s: { k: 'b', j: 'c' } });
    expect(problems.map((p) => p.line)).to.deep.equal([1, 4, 5, 6]);
  });

  it('an empty or section-less file is {}', () => {
    expect(parse('').config).to.deep.equal({});
    expect(parse('just text\n').config).to.deep.equal({});
  });

  describe('differential check against Python configparser (/usr/bin/python3, real child process)', function () {
    this.timeout(60_000);
    let dir: string;
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-ini-'));
    });
    after(() => rm(dir, { recursive: true, force: true }));

    // How Python reads each file: the options farmhand matches (docs/test-scripts.md).
    const PY = `
import configparser, json, sys
out = []
for path in sys.argv[1:]:
    cp = configparser.ConfigParser(interpolation=None)
    try:
        cp.read(path, encoding="utf-8-sig")
        secs = {name: dict(cp[name]) for name in cp.sections()}
        if cp.defaults():
            secs["DEFAULT"] = dict(cp.defaults())
        out.append({"ok": secs})
    except configparser.Error as e:
        out.append({"error": type(e).__name__})
print(json.dumps(out))
`;

    const corpus: string[] = [
      '[s]\na=1\nb =2\nc= 3\nd : 4\ne:5\nf :6\n',
      '[s]\nkey = value = more\nurl: http://x:80/a=b\ncolon:first = second\n',
      '[s]\na = b ; not a comment\nc = d # nor this\n#comment\n;comment\n   ; indented comment\n',
      '[s]\nmulti = first\n  second\n\tthird\n\n  after blank\n\n\nnext = 1\n',
      '[s]\nmulti =\n  starts empty\n  two\n',
      '[s]\nempty =\nalso:\n',
      '[DEFAULT]\nd = 1\nx = default\n[a]\nx = own\n[b]\n',
      '[DEFAULT]\nd = 1\n[DEFAULT]\ne = 2\n[a]\n',
      '[MiXeD]\nCamelKey = V\nUPPER = W\n',
      '[s]\npct = 50%\ninterp = %(pct)s and ${pct}\n',
      '[a.b.c]\nk = v\n[device_under_test.hdmi]\ninput = 2\n',
      '[s] trailing text\nk = v\n[t]x]\nj = w\n',
      '  [indented]\n  k = v\n    cont\n',
      '[s]\r\nwin = crlf\r\nmac = cr\rnext = n\r\n',
      '\ufeff[bom]\nk = v\n',
      '[s]\nk = v   \n   spaced key   =   spaced value   \n',
      '[s]\nk = a\n  # comment inside continuation\n  b\n',
      '[s]\nk = a\n\n# comment after blank\n  b\n',
      '[ spaced name ]\nk = v\n',
      '[s]\nunicode = café ☕\nkéy = ü\n',
      '[s]\nk=\n\n\n',
      '[s]\n\tk = tabbed key\nj = x\n',
      '# only comments\n; here\n\n',
      '[s]\nk = v\n[t]\n[u]\nj = w\n',
      '[s]\n=novalue\n',
      '[s]\nk = a\nk = b\n',
      '[s]\n[s]\n',
      'k = before section\n[s]\n',
      '[s]\nno delimiter\n',
      '[]\nk = v\n',
      '[s]\nk = v\n  cont\nbad line\n  more\n',
    ];

    it(`reads every file of a ${corpus.length}-file corpus as Python does, and reports problems exactly where Python refuses`, async () => {
      const files = await Promise.all(corpus.map(async (text, i) => {
        const f = path.join(dir, `c${i}.conf`);
        await writeFile(f, text);
        return f;
      }));
      const py = JSON.parse(execFileSync('/usr/bin/python3', ['-c', PY, ...files], { encoding: 'utf8' })) as Array<{ ok?: unknown; error?: string }>;
      let refused = 0;
      corpus.forEach((text, i) => {
        const ours = parse(text);
        const what = JSON.stringify(text);
        if (py[i]!.error) {
          refused++;
          expect(ours.problems, `${what}: Python raises ${py[i]!.error}`).to.not.deep.equal([]);
        } else {
          expect(ours.problems, what).to.deep.equal([]);
          expect(ours.config, what).to.deep.equal(py[i]!.ok);
        }
      });
      expect(refused, 'the corpus has files Python refuses').to.be.greaterThan(3);
      expect(corpus.length - refused, 'and many it reads').to.be.greaterThan(20);
    });
  });
});
