/**
 * Mocha root hooks (loaded by .mocharc.cjs): a test during which a response
 * broke the OpenAPI contract fails, with the path, status and schema error
 * (test/helpers/contract.ts records them). The test's own function is
 * wrapped, so the failure is the test's and the rest of its suite still runs;
 * what a before/beforeEach hook received fails the test that follows it;
 * what an after hook received is reported by afterEach or the final afterAll.
 */
import type { Context } from 'mocha';
import { takeViolations } from './contract.js';

const failure = (found: string[]) => new Error(`response(s) not conforming to the OpenAPI document (docs/openapi.md):\n  ${found.join('\n  ')}`);

function throwIfAny(): void {
  const found = takeViolations();
  if (found.length) throw failure(found);
}

export const mochaHooks = {
  beforeEach(this: Context): void {
    const test = this.currentTest;
    // A callback-style test (fn.length > 0) is left as it is; afterEach reports for it.
    if (!test?.fn || test.fn.length > 0 || (test.fn as { contractWrapped?: boolean }).contractWrapped) return;
    const fn = test.fn as (this: Context) => unknown;
    const wrapped = async function (this: Context): Promise<void> {
      await fn.call(this);
      throwIfAny();
    };
    (wrapped as { contractWrapped?: boolean }).contractWrapped = true;
    test.fn = wrapped;
  },
  afterEach(): void {
    throwIfAny();
  },
  afterAll(): void {
    throwIfAny();
  },
};
