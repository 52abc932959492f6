#!/usr/bin/env node
// The remote-shell agent of `topocoll cluster` (src/cluster/agent.ts): one executable file, as
// Hydra's -launcher-exec wants it.
import { agentMain } from '../cluster/agent.js';

process.exitCode = await agentMain(process.argv.slice(2), process.env, process.cwd());
