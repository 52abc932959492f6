/**
 * What dist/cli/main.js runs, bundled into dist/cli-bundle/cli.js with the commands' modules as its
 * chunks (scripts/bundle.mjs): `topocoll run` starts every job of the test suite and of a user's
 * session, and one bundled file loads in well under half the time of the ~200 compiled modules
 * the launcher's path imports (a 1-rank job: 0.30 → 0.19 s of CPU on the AMD EPYC VM).
 */
export { runCli } from './run-cli.js';
export { processIo } from './io.js';
