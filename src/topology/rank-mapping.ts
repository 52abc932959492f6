import { TopocollError } from '../errors.js';
import { formatLocality } from './locality-string.js';
import { computeLocality } from './process-locality.js';
import type { MachineTopology, RankPlacement, TopologyObject } from './types.js';

/**
 * Rank mapping: where a launcher would put the ranks of a job on identical nodes — the `mpirun --map-by …
 * --bind-to …` of a described cluster — so groups can be planned without running anything.
 * Ranks fill nodes in order: node k holds ranks k·ppn … k·ppn + ppn − 1.
 */

export type MapBy = 'core' | 'numa' | 'socket';
export type BindTo = 'core' | 'socket' | 'none';

/** The mapping policy (public as PlacementOptions, the options of placeRanks). */
export interface PlacementOptions {
  nodes: readonly string[];
  ranksPerNode: number;
  mapBy: MapBy;
  bindTo: BindTo;
}

export function placeRanks(machine: MachineTopology, options: PlacementOptions): RankPlacement[] {
  const { nodes, ranksPerNode: ppn, mapBy, bindTo } = options;
  if (!Number.isInteger(ppn) || ppn < 1) {
    throw new TopocollError('EINVAL', `--ppn must be a positive integer, got ${ppn}`);
  }
  if (nodes.length === 0) throw new TopocollError('EINVAL', 'no nodes given', { hint: 'Pass --nodes, e.g. --nodes node[01-64].' });
  const cores = coresOf(machine);
  if (ppn > cores.length) {
    throw new TopocollError('EINVAL', `--ppn ${ppn} is larger than the ${cores.length} cores of the machine (${machine.source})`, {
      hint: 'Use at most one rank per core, or a machine description with more cores.',
    });
  }
  const coreOfLocalRank = mapBy === 'core' ? cores.slice(0, ppn) : mapRoundRobin(machine, cores, mapBy, ppn);
  // Every node is the same machine, so each local rank's locality is computed once.
  const localities = coreOfLocalRank.map((core) => formatLocality(computeLocality(machine, cpusFor(machine, core, bindTo)).locality));
  const placements: RankPlacement[] = [];
  nodes.forEach((node, k) => {
    for (let j = 0; j < ppn; j++) placements.push({ rank: k * ppn + j, node, locality: localities[j]! });
  });
  return placements;
}

/** Cores in logical order; a machine that reports no cores has one per PU. */
function coresOf(machine: MachineTopology): TopologyObject[] {
  const cores = machine.objects.core ?? machine.objects.pu ?? [];
  return cores.filter((c) => c.pus.length > 0);
}

/**
 * Local rank j → unit j mod units, next unused core there; a unit with no free core (full,
 * or a memory-only NUMA node) passes to the next unit in order. Cores are tracked machine-wide
 * because two NUMA nodes can cover the same cores (DRAM and HBM behind one package).
 */
function mapRoundRobin(machine: MachineTopology, cores: TopologyObject[], mapBy: 'numa' | 'socket', ppn: number): TopologyObject[] {
  const units = machine.objects[mapBy] ?? [];
  if (units.length === 0) {
    throw new TopocollError('EINVAL', `--map-by ${mapBy}: the machine (${machine.source}) has no ${mapBy} objects`, {
      hint: 'Map by core instead.',
    });
  }
  const coresOfUnit = units.map((u) => {
    const unitPus = new Set(u.pus);
    return cores.filter((c) => c.pus.every((pu) => unitPus.has(pu)));
  });
  const used = new Set<TopologyObject>();
  const out: TopologyObject[] = [];
  for (let j = 0; j < ppn; j++) {
    let core: TopologyObject | undefined;
    for (let step = 0; step < units.length && core === undefined; step++) {
      core = coresOfUnit[(j + step) % units.length]!.find((c) => !used.has(c));
    }
    if (core === undefined) {
      const inUnits = new Set(coresOfUnit.flat()).size;
      throw new TopocollError(
        'EINVAL',
        `--map-by ${mapBy}: no free core left for local rank ${j}: only ${inUnits} of the ${cores.length} cores lie in a ${mapBy} unit (${machine.source})`,
        {
          hint: `Use --ppn ${inUnits} or less, or map by core.`,
        },
      );
    }
    used.add(core);
    out.push(core);
  }
  return out;
}

function cpusFor(machine: MachineTopology, core: TopologyObject, bindTo: BindTo): number[] {
  switch (bindTo) {
    case 'core':
      return core.pus;
    case 'none':
      return machine.pus;
    case 'socket': {
      const socket = (machine.objects.socket ?? []).find((s) => s.pus.includes(core.pus[0]!));
      return socket?.pus ?? machine.pus;
    }
  }
}
