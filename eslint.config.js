// ESLint with typescript-eslint's type-checked rules over src/, test/ and bench/ (`npm run lint`, part of
// `npm run check`). no-floating-promises comes first: an unawaited promise loses its error or races a later
// step. What is turned down below, and why, is said beside each rule.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', '.farmhand-demo/', 'node_modules/', 'python/', 'examples/', 'scripts/', '**/*.cjs', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Koa's `app.callback()` handed to node:http returns a promise where a void listener is typed; Koa
      // catches its own errors. Every other misused promise (conditions, spreads, returns) stays an error.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      // Ports are async by contract; an implementation with nothing to await (memory stores, no-op
      // transports) is still async on purpose.
      '@typescript-eslint/require-await': 'off',
      // Its hits here were an AbortSignal's reason passed on unchanged (the contract of abort), a stored
      // failure typed `unknown`, and execFile's error, whose type the rule does not see as an Error.
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      // A leading underscore marks a parameter or a destructured part left out on purpose (as tsc's
      // noUnusedParameters allows).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  {
    // Control characters in these regular expressions are the point: ANSI escapes stripped from logs, the
    // characters XML 1.0 cannot hold. (src/runner/revision.ts says so inline.)
    files: ['src/http/formats/text.ts', 'test/unit/formats-junit.test.ts'],
    rules: { 'no-control-regex': 'off' },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // supertest types every response body as `any`: typing each of the hundreds of `res.body.x` reads in
      // the tests would rewrite them for no finding. Production code (src/) keeps these rules.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // chai's property assertions (`.to.be.true`, `.and.not.empty`) are expressions by design.
      '@typescript-eslint/no-unused-expressions': 'off',
    },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
  {
    // The portal's client scripts: plain ES modules for the browser, typed by tsc with `// @ts-check`
    // (tsconfig.client.json, which also knows the DOM's names: no-undef would only repeat it, wrongly).
    files: ['src/web/static/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    rules: { ...tseslint.configs.disableTypeChecked.rules, 'no-undef': 'off' },
  },
);
