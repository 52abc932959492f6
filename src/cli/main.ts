#!/usr/bin/env node
import type * as Cli from './bundle-entry.js';

// The CLI runs from the bundle (dist/cli-bundle/cli.js, scripts/bundle.mjs; see bundle-entry.ts),
// which `npm run build` makes beside dist/cli/.
const { runCli, processIo } = (await import(new URL('../cli-bundle/cli.js', import.meta.url).href)) as typeof Cli;
process.exitCode = await runCli(process.argv.slice(2), processIo());
