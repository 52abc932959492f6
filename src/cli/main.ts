#!/usr/bin/env node
import { runCli } from './run-cli.js';
import { processIo } from './io.js';

process.exitCode = await runCli(process.argv.slice(2), processIo());
