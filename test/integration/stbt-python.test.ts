// The Python side of the stbt API (python/stbt_core, python/stbt): each
// `test/python/test_*.py` is a `unittest` module run by /usr/bin/python3 in a
// child process, one mocha test per file; a failing module fails its mocha
// test with the unittest output. The files start real child processes
// (`python -m farmhand.run`) and a stand-in for the daemon's control socket
// (test/python/_fake_daemon.py); the daemon itself runs in
// test/integration/stbt-pack.test.ts.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../../src/version.js';

const DIR = path.join(projectRoot, 'test', 'python');
const FILES = readdirSync(DIR).filter((f) => /^test_.*\.py$/.test(f)).sort();

describe('stbt Python API (unittest)', function () {
  // A guard, not a measure: test_stbt_ocr.py takes about a minute on an idle machine and, beside stress-ng on both
  // cores, has taken 400 s (its tesseract children wait for a core); 300 s failed it there.
  this.timeout(900_000);

  it('has test files', () => {
    expect(FILES.length).to.be.greaterThan(0);
  });

  for (const file of FILES) {
    it(file, async () => {
      // stbt's per-user configuration file (`set_config` writes it, as stb-tester does) in a folder of the module's own.
      const configHome = await mkdtemp(path.join(tmpdir(), 'stbt-xdg-'));
      const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
        const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('FARMHAND_')));
        execFile(
          '/usr/bin/python3',
          ['-m', 'unittest', '-v', file.replace(/\.py$/, '')],
          {
            cwd: DIR,
            env: { ...env, PYTHONPATH: path.join(projectRoot, 'python'), PYTHONDONTWRITEBYTECODE: '1', XDG_CONFIG_HOME: configHome },
            maxBuffer: 16 << 20,
          },
          (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
        );
      });
      await rm(configHome, { recursive: true, force: true });
      expect(code, output).to.equal(0);
    });
  }
});
