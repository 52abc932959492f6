import { formatLocalitiesFile } from '../../topology/localities-file.js';
import { parseCommandArgs } from '../args.js';
import type { CliIo } from '../io.js';
import { placementsFromMapping, mappingOptions, mappingUsage } from '../mapping-options.js';

export const localitiesHelp = `topocoll localities — print where every rank of a described job runs

Usage: topocoll localities --hwloc-xml FILE --nodes HOSTLIST --ppn N --map-by core|numa|socket
                          [--bind-to core|socket|none]

${mappingUsage}

Prints a localities file: one line "<rank> <node> <locality>" per rank, the locality as a PMIx
locality string. Ranks fill nodes in order (node k holds ranks k·N … k·N+N−1).
`;

export function localitiesCommand(argv: string[], io: CliIo): number {
  const { values } = parseCommandArgs('localities', argv, { ...mappingOptions, help: { type: 'boolean' } });
  if (values.help) {
    io.stdout(localitiesHelp);
    return 0;
  }
  io.stdout(formatLocalitiesFile(placementsFromMapping('localities', values, io)));
  return 0;
}
