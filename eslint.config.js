// ESLint (flat config) over src/, test/, bench/ and scripts/: the recommended rules of ESLint and typescript-eslint
// that the code already follows, without type information (no parserOptions.project: fast, and no second compiler).
// The rules turned off, and why, are in docs/decisions.md ("Lint: ESLint with typescript-eslint").
//
// The build compiles with TypeScript 7 (`typescript`, the native compiler), which has no JavaScript compiler API;
// typescript-eslint parses with TypeScript 6's API. So inside this ESLint process `require('typescript')` resolves
// to the TypeScript 6.0 that @ts-morph/common bundles (a devDependency with no `tsc` bin of its own, so `tsc` stays
// TypeScript 7), and package.json's `overrides` lets npm accept typescript-eslint's peer range on TypeScript 7.
// Drop both, and @ts-morph/common, once typescript-eslint parses with TypeScript 7.
import { registerHooks } from 'node:module';
import { defineConfig } from 'eslint/config';

const typescript6 = new URL('./scripts/lint-typescript6.cjs', import.meta.url).href;
registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === 'typescript') return { url: typescript6, format: 'commonjs', shortCircuit: true };
    return nextResolve(specifier, context);
  },
});

// Imported after the hook is in place: typescript-eslint requires `typescript` as it loads.
const { default: js } = await import('@eslint/js');
const { default: globals } = await import('globals');
const { default: tseslint } = await import('typescript-eslint');

export default defineConfig(
  { ignores: ['dist/', 'vendor/', 'node_modules/', 'coverage/', 'tmp/', '.vitest-cache/'] },
  {
    files: ['src/**/*.ts', 'test/**/*.{ts,mjs}', 'bench/**/*.mjs', 'scripts/**/*.{mjs,cjs}', '*.{js,ts}'],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Unused on purpose: a leading `_` says so (arguments, destructured slots, caught errors); `...rest` drops keys.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // `ok && f()` and `c ? f() : g()` as statements are the code's style; a bare `(a(), b())` sequence is not allowed.
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
      // `const self = this` for the prom-client collect() callbacks, whose `this` is the metric.
      '@typescript-eslint/no-this-alias': ['error', { allowedNames: ['self'] }],
      // Off: deliberate in this code (docs/decisions.md, "Lint: ESLint with typescript-eslint").
      'no-control-regex': 'off',
      'no-useless-assignment': 'off',
      'preserve-caught-error': 'off',
      // Traps that catch real bugs; the code already follows them.
      eqeqeq: ['error', 'smart'],
      'no-fallthrough': 'error',
      'no-self-compare': 'error',
      'no-throw-literal': 'error',
      'no-implied-eval': 'error',
      'no-new-wrappers': 'error',
      'no-return-assign': 'error',
      'no-useless-concat': 'error',
      radix: 'error',
    },
  },
  {
    // Tests read JSON answers and database rows loosely on purpose.
    files: ['test/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
