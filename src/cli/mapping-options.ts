import { resolve } from 'node:path';
import { readHwlocXmlFile } from '../topology/hwloc-xml.js';
import { readLocalitiesFile } from '../topology/localities-file.js';
import { expandHostlist } from '../topology/network/hostlist.js';
import { placeRanks, type BindTo, type MapBy } from '../topology/rank-mapping.js';
import type { RankPlacement } from '../topology/types.js';
import { parseNonNegativeInt, requireOne, usageError } from './args.js';
import type { CliIo } from './io.js';

/** The options that map a described job's ranks onto a cluster of identical nodes (mpirun's --map-by/--bind-to). */
export const mappingOptions = {
  'hwloc-xml': { type: 'string' },
  nodes: { type: 'string' },
  ppn: { type: 'string' },
  'map-by': { type: 'string' },
  'bind-to': { type: 'string' },
} as const;

export const mappingUsage = `  --hwloc-xml FILE   the machine of every node (hwloc XML, v2 or v3)
  --nodes HOSTLIST   node names, e.g. node[01-64]
  --ppn N            ranks per node (at most the number of cores)
  --map-by core|numa|socket
                     local rank j → core j (core), or round-robin over units, next free
                     core of the unit (numa, socket)
  --bind-to core|socket|none
                     what each rank may run on (default core)`;

export interface MappingValues {
  'hwloc-xml'?: string;
  nodes?: string;
  ppn?: string;
  'map-by'?: string;
  'bind-to'?: string;
}

export function placementsFromMapping(command: string, values: MappingValues, io: CliIo): RankPlacement[] {
  const missing = (['hwloc-xml', 'nodes', 'ppn', 'map-by'] as const).filter((k) => values[k] === undefined);
  if (missing.length > 0) {
    throw usageError(command, `missing ${missing.map((k) => `--${k}`).join(', ')} (a job is described by --hwloc-xml, --nodes, --ppn and --map-by)`);
  }
  const machine = readHwlocXmlFile(resolve(io.cwd, values['hwloc-xml']!));
  const nodes = expandHostlist(values.nodes!);
  const ranksPerNode = parseNonNegativeInt(command, 'ppn', values.ppn!);
  const mapBy = requireOne<MapBy>(command, 'map-by', values['map-by'], ['core', 'numa', 'socket']);
  const bindTo = requireOne<BindTo>(command, 'bind-to', values['bind-to'] ?? 'core', ['core', 'socket', 'none']);
  return placeRanks(machine, { nodes, ranksPerNode, mapBy, bindTo });
}

/** `--localities FILE`, or the mapping options; not both. */
export function placementsFrom(command: string, values: MappingValues & { localities?: string }, io: CliIo): RankPlacement[] {
  const described = Object.keys(mappingOptions).some((k) => values[k as keyof MappingValues] !== undefined);
  if (values.localities !== undefined) {
    if (described) {
      throw usageError(command, 'give either --localities or the placement options, not both');
    }
    return readLocalitiesFile(resolve(io.cwd, values.localities));
  }
  return placementsFromMapping(command, values, io);
}
