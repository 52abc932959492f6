import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { TopocollError } from '../../errors.js';
import { launch, type BindPolicy } from '../launcher.js';
import { parseCommandArgs, parseNonNegativeInt, requireOne, usageError } from '../args.js';
import type { CliIo } from '../io.js';

export const runHelp = `topocoll run — start a job of N Node processes on this machine

Usage: topocoll run -n N [--bind core|numa|socket|none] [--nodes K] [--config F] [--network F]
                    [--tag-output] [--timeout S] script [args…]

  -n, --np N         number of ranks
  --bind POLICY      bind each rank to a core (default), a NUMA node, a package, or not at all;
                     (rank r → unit r mod units: emulated nodes share this machine's
                     cores), wrapping around when ranks outnumber the units
  --nodes K          emulate K compute nodes node0…node{K-1} (ranks in blocks): separate
                     shared-memory domains and TCP between them
  --config F         topocoll YAML configuration for every rank
  --network F        node-to-switch file or Slurm topology.conf for the (emulated) nodes
  --tag-output       prefix every output line with [rank]
  --timeout S        seconds for init, and for the others to report a failed rank (default:
                     timeouts.initMs of the configuration, 30)

Exits with the first non-zero exit code of a rank; when one rank fails the others get the
timeout (plus 2 s) to report it (EPEERLOST), then are stopped.
`;

const OPTIONS = {
  np: { type: 'string', short: 'n' },
  bind: { type: 'string' },
  nodes: { type: 'string' },
  config: { type: 'string' },
  network: { type: 'string' },
  'tag-output': { type: 'boolean' },
  timeout: { type: 'string' },
  help: { type: 'boolean' },
} as const;

/** Options come before the script; everything from the script on belongs to the script. */
function splitAtScript(argv: string[]): { own: string[]; script?: string; args: string[] } {
  const takesValue = new Set(['-n', '--np', '--bind', '--nodes', '--config', '--network', '--timeout']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return { own: argv.slice(0, i), script: argv[i + 1], args: argv.slice(i + 2) };
    if (!a.startsWith('-')) return { own: argv.slice(0, i), script: a, args: argv.slice(i + 1) };
    if (takesValue.has(a)) i++;
  }
  return { own: argv, args: [] };
}

export async function runCommand(argv: string[], io: CliIo): Promise<number> {
  const { own, script, args } = splitAtScript(argv);
  const { values } = parseCommandArgs('run', own, OPTIONS);
  if (values.help) {
    io.stdout(runHelp);
    return 0;
  }
  if (values.np === undefined) throw usageError('run', '-n N is required');
  if (script === undefined) throw usageError('run', 'no script given (topocoll run -n 4 app.js)');
  const timeout = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeout !== undefined && !(timeout > 0)) throw usageError('run', `--timeout must be a positive number of seconds, got "${values.timeout}"`);
  // The command line is checked whole (status 2) before the script is looked for (status 1).
  const ranks = parseNonNegativeInt('run', 'np', values.np);
  const bind = requireOne<BindPolicy>('run', 'bind', values.bind ?? 'core', ['core', 'numa', 'socket', 'none']);
  const nodes = values.nodes === undefined ? undefined : parseNonNegativeInt('run', 'nodes', values.nodes);
  if (!existsSync(resolve(io.cwd, script))) {
    throw new TopocollError('EINVAL', `topocoll run: the script ${script} does not exist`, { file: resolve(io.cwd, script) });
  }
  return launch({
    ranks,
    bind,
    nodes,
    config: values.config === undefined ? undefined : resolve(io.cwd, values.config),
    network: values.network === undefined ? undefined : resolve(io.cwd, values.network),
    output: values['tag-output'] ? 'tagged' : 'inherit',
    timeoutMs: timeout === undefined ? undefined : Math.round(timeout * 1000),
    script: resolve(io.cwd, script),
    args,
    env: io.env,
    stdout: io.stdout,
    stderr: io.stderr,
  });
}
