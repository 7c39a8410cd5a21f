import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { checkRepoPath, checkRevision, checkSha, revisionProblem } from '../../src/runner/revision.js';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof FarmError ? e.code : 'not a FarmError';
  }
  return undefined;
}

describe('runner: revision validation', () => {
  it('accepts what clients send: "a branch, a tag, a full or abbreviated SHA", HEAD, any full ref (COMPAT)', () => {
    for (const ok of [
      'main',
      'HEAD',
      'refs/heads/main',
      'refs/snapshots/alice',
      'refs/tags/v1.0',
      'v1.0',
      'feature/login-page_2',
      'abcd',
      '0123456789abcdef0123456789abcdef01234567',
      'user@example',
    ]) {
      expect(revisionProblem(ok), ok).to.equal(undefined);
      expect(checkRevision(ok)).to.equal(ok);
    }
  });

  it('refuses anything git could read as an option or a revision expression (option injection is impossible)', () => {
    for (const bad of [
      '',
      '-x',
      '--upload-pack=touch /tmp/pwned',
      '--output=/tmp/pwned',
      '--all',
      'main..other',
      'main...other',
      'main~1',
      'main^',
      'HEAD^{tree}',
      'main:tests/basic.py',
      ':/fix',
      'a b',
      'tab\there',
      'nul\0byte',
      'new\nline',
      '@',
      'HEAD@{1}',
      'refs/heads/.hidden',
      'branch.lock',
      'refs/heads/',
      '/main',
      'a//b',
      'wild*',
      'what?',
      'br[acket',
      'back\\slash',
      'ends.',
      'x'.repeat(1025),
    ]) {
      expect(revisionProblem(bad), JSON.stringify(bad)).to.be.a('string');
      expect(codeOf(() => checkRevision(bad)), JSON.stringify(bad)).to.equal('invalid_request');
    }
  });

  it('a commit SHA handed between modules must be full and lowercase', () => {
    expect(checkSha('0123456789abcdef0123456789abcdef01234567')).to.have.length(40);
    expect(codeOf(() => checkSha('a'.repeat(64)))).to.equal(undefined);
    for (const bad of ['abcd', 'A'.repeat(40), `${'a'.repeat(40)}\n`, '--all', 'g'.repeat(40)]) {
      expect(codeOf(() => checkSha(bad)), bad).to.equal('invalid_request');
    }
  });

  it('paths inside the test pack stay inside it and on one line', () => {
    for (const ok of ['config/stbt.conf', '.stbt.conf', 'tests/a b.py']) expect(checkRepoPath(ok)).to.equal(ok);
    for (const bad of ['', '/etc/passwd', '../x', 'a/../../x', 'a/./b', 'a//b', 'a/', 'new\nline', 'nul\0']) {
      expect(codeOf(() => checkRepoPath(bad)), JSON.stringify(bad)).to.equal('invalid_request');
    }
  });
});
