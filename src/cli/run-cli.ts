import { isTopocollError } from '../errors.js';
import { groupsCommand, groupsHelp } from './commands/groups.js';
import { localitiesCommand, localitiesHelp } from './commands/localities.js';
import { runCommand, runHelp } from './commands/run.js';
import { benchCommand, benchHelp } from './commands/bench.js';
import { topoCommand, topoHelp } from './commands/topo.js';
import { tuneCommand, tuneHelp } from './commands/tune.js';
import type { CliIo } from './io.js';

type Command = (argv: string[], io: CliIo) => number | Promise<number>;

const commands: Record<string, { run: Command; help: string }> = {
  topo: { run: topoCommand, help: topoHelp },
  localities: { run: localitiesCommand, help: localitiesHelp },
  groups: { run: groupsCommand, help: groupsHelp },
  run: { run: runCommand, help: runHelp },
  bench: { run: benchCommand, help: benchHelp },
  tune: { run: tuneCommand, help: tuneHelp },
};

const usage = `topocoll — topology-aware collectives for Node.js

Usage: topocoll <command> [options]

Commands:
  topo         this machine: hardware levels, which carry groups, this process's locality
  localities   where every rank of a described job runs (a localities file)
  groups       the per-level groups and leaders of a job, without running it
  run          start a job of N processes on this machine (optionally as K emulated nodes)
  bench        OSU-style latency tables, with Open MPI's own collectives beside them
  tune         measure the cost models on this machine and write them to YAML: the
               shared-memory engine's (tune shm), the links' LogGP parameters (tune links),
               or both (tune)

"topocoll <command> --help" shows a command's options.
`;

/** Runs one command line; returns the exit code. Errors are printed, never thrown. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(usage);
    return name === undefined ? 1 : 0;
  }
  const command = commands[name];
  if (command === undefined) {
    io.stderr(`topocoll: unknown command "${name}"\n\n${usage}`);
    return 1;
  }
  try {
    return await command.run(rest, io);
  } catch (e) {
    if (isTopocollError(e)) {
      io.stderr(`topocoll ${name}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
