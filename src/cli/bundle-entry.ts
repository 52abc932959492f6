/**
 * What dist/cli/main.js runs, bundled into dist/cli-bundle/cli.js with the commands' modules as its
 * chunks (scripts/bundle.mjs): every job starts a launcher, and one bundled file loads far faster
 * than the ~200 compiled modules the launcher's path imports (figures: docs/guide/development.md,
 * "Test times").
 */
export { runCli } from './run-cli.js';
export { processIo } from './io.js';
