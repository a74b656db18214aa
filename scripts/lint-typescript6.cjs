// What `require('typescript')` gives inside ESLint (see eslint.config.js): TypeScript 6's compiler API, which
// typescript-eslint parses with, from the copy that @ts-morph/common bundles. The build's `tsc` is TypeScript 7.
module.exports = require('@ts-morph/common').ts;
