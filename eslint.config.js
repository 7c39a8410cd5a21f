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
  // Layers: which folder of src/ may import which (docs/testing.md, "ESLint: the layers"). An import string
  // `../http/x.js` from src/core/ leaves core for http; `(\.\./)+` matches it from any depth.
  {
    // The domain: pure, everything it reads comes in as a port. No other folder of src/, no I/O module.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { regex: '^\\.\\./', message: 'src/core imports no other folder of src/: take what you need as a port (core/ports.ts).' },
          {
            regex: '^(node:)?(child_process|fs|fs/promises|net|http|https|dgram|worker_threads)$',
            message: 'src/core does no I/O and starts no process: take a port (core/ports.ts).',
          },
          {
            regex: '^(koa|koa-body|@koa/.*|serialport|@serialport/.*|sharp|lowdb|lowdb/.*|pg|ws|preact|preact/.*|preact-render-to-string|prom-client|pino)$',
            message: 'src/core imports no web framework, hardware, image, storage or database library.',
          },
        ],
      }],
    },
  },
  {
    // Below the HTTP layer: configuration, storage, the runner, hardware, notifications, the service manager, metrics.
    files: ['src/{config,storage,runner,hardware,notify,service,metrics}/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: '^(\\.\\./)+(http|web|farm|cli)/|^(\\.\\./)+((daemon|main)\\.js$|daemon/)', message: 'This layer is below http, web, farm and the CLI: it must not import them.' }],
      }],
    },
  },
  {
    // The node's HTTP API: below the web pages and the farm. app.ts is the one place that puts the routers
    // together, the pages' included.
    files: ['src/http/**/*.ts'],
    ignores: ['src/http/app.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: '^(\\.\\./)+(web|farm|cli)/|^(\\.\\./)+((daemon|main)\\.js$|daemon/)', message: 'src/http is below the web pages and the farm: move what both need into src/http (or src/core).' }],
      }],
    },
  },
  {
    files: ['src/web/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: '^(\\.\\./)+(farm|cli)/|^(\\.\\./)+((daemon|main)\\.js$|daemon/)', message: 'src/web (the node\'s pages) is below the farm: the portal uses the pages, not the other way.' }],
      }],
    },
  },
  {
    files: ['src/farm/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ regex: '^(\\.\\./)+cli/|^(\\.\\./)+((daemon|main)\\.js$|daemon/)', message: 'src/farm does not import the CLI or the daemon.' }],
      }],
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
