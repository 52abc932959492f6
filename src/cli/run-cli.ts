import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTopocollError } from '../errors.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { CliUsageError, nearestOption } from './args.js';
import type { CliIo } from './io.js';

type Command = (argv: string[], io: CliIo) => number | Promise<number>;

/**
 * Each command's module, loaded when the command runs: `topocoll run` starts every job, and
 * loading the other commands' modules (the bench, the tuner, the planners) would add to each
 * job's start what a rank's own start costs.
 */
export const commands: Record<string, () => Promise<Command>> = {
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
       topocoll --version | --help

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

/** The package's version (package.json, beside dist/ and src/). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * Prints a usage error as one line that points at the help, for the command it concerns or the
 * top level; the exit status of every usage error is 2 (as with POSIX utilities), so that scripts
 * can tell a wrong command line (2) from a failure of what it ran (1).
 */
function printUsageError(io: CliIo, command: string, detail: string): 2 {
  const self = command === '' ? 'topocoll' : `topocoll ${command}`;
  io.stderr(
    `${self}: EINVAL: ${detail.replace(/\.$/, '')}${detail.endsWith('?') ? '' : '.'} Run "${self} --help" for the ${command === '' ? 'commands' : 'options'}.\n`,
  );
  return 2;
}

/** Runs one command line; returns the exit code (0, 1 when what it ran failed, 2 for a usage error). Errors are printed, never thrown. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.stderr(usage);
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    io.stdout(usage);
    return 0;
  }
  if (name === '--version' || name === '-v') {
    io.stdout(`topocoll ${packageVersion()}\n`);
    return 0;
  }
  const load = commands[name];
  if (load === undefined) {
    if (name.startsWith('-')) {
      const near = nearestOption(name, ['--help', '-h', '--version', '-v']);
      return printUsageError(io, '', `unknown option ${name}${near === undefined ? '' : `; did you mean ${near}?`}`);
    }
    const near = nearestOption(
      `--${name}`,
      Object.keys(commands).map((c) => `--${c}`),
    );
    return printUsageError(io, '', `unknown command "${name}"${near === undefined ? '' : `; did you mean "${near.slice(2)}"?`}`);
  }
  try {
    const command = await load();
    return await command(rest, io);
  } catch (e) {
    if (e instanceof CliUsageError) return printUsageError(io, e.command, e.detail);
    if (isTopocollError(e)) {
      io.stderr(`topocoll ${name}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
