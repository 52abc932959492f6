import { fileURLToPath } from 'node:url';

/**
 * The package's root directory (where package.json, config/ and build/ are), with a trailing
 * slash. Every module that finds a file of the package starts here, because the same code runs
 * from three places that are all two directories below the root: src/util/ (tests), dist/util/
 * (the CLI, which runs the compiled modules) and dist/bundle/ (what `import 'topocoll'` loads,
 * scripts/bundle.mjs). A path relative to a module's own URL would break in the bundle.
 */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));
