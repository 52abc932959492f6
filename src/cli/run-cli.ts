import { isTopocollError } from '../errors.js';
import type { CliIo } from './io.js';

type Command = (argv: string[], io: CliIo) => number | Promise<number>;

/**
 * Each command's module, loaded when the command runs: `topocoll run` starts every job, and
 * loading the other commands' modules (the bench, the tuner, the planners) would add to each
 * job's start what a rank's own start costs.
 */
const commands: Record<string, () => Promise<Command>> = {
  topo: async () => (await import('./commands/topo.js')).topoCommand,
  localities: async () => (await import('./commands/localities.js')).localitiesCommand,
  groups: async () => (await import('./commands/groups.js')).groupsCommand,
  run: async () => (await import('./commands/run.js')).runCommand,
  bench: async () => (await import('./commands/bench.js')).benchCommand,
  tune: async () => (await import('./commands/tune.js')).tuneCommand,
  cluster: async () => (await import('./commands/cluster.js')).clusterCommand,
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
  cluster      an emulated cluster of hosts made of Linux namespaces (up, exec, status,
               down), with the agent that lets mpirun and mpiexec start processes in it

"topocoll <command> --help" shows a command's options.
`;

/** Runs one command line; returns the exit code. Errors are printed, never thrown. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(usage);
    return name === undefined ? 1 : 0;
  }
  const load = commands[name];
  if (load === undefined) {
    io.stderr(`topocoll: unknown command "${name}"\n\n${usage}`);
    return 1;
  }
  try {
    const command = await load();
    return await command(rest, io);
  } catch (e) {
    if (isTopocollError(e)) {
      io.stderr(`topocoll ${name}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
