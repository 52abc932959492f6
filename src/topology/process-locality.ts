import { TopocollError } from '../errors.js';
import { formatIndexList } from './index-list.js';
import { LOCALITY_CODE, type Locality, type LocalityToken, type MachineTopology, type ObjectKind } from './types.js';

/**
 * Computes a process's locality from its affinity, exactly as PMIx's generator does
 * (`pmix_hwloc_generate_locality_string`), so that topocoll produces the same string whether
 * or not a PMIx runtime supplied one.
 */

/** PMIx writes the CPU-side levels top-down and, with hwloc 2, NUMA last. */
const PMIX_ORDER: readonly ObjectKind[] = ['socket', 'l3', 'l2', 'l1', 'core', 'pu', 'numa'];

/**
 * For each kind the machine has, the logical indices of the objects whose PUs intersect
 * `cpus` (PMIx semantics: a process bound to two cores is on both). A kind none of whose
 * objects intersect gets no token, as in PMIx. `bound` is false when `cpus` is the whole
 * machine: PRRTE publishes no locality for such processes, and the planner treats them as
 * living on the node only.
 */
export function computeLocality(machine: MachineTopology, cpus: readonly number[]): { locality: Locality; bound: boolean } {
  if (cpus.length === 0) throw new TopocollError('EINVAL', 'cannot compute a locality for an empty CPU set');
  const maxPu = machine.pus.length === 0 ? -1 : machine.pus[machine.pus.length - 1]!;
  const inMachine = new Uint8Array(maxPu + 1);
  for (const pu of machine.pus) inMachine[pu] = 1;
  const selected = new Uint8Array(maxPu + 1);
  const outside: number[] = [];
  let count = 0;
  for (const cpu of cpus) {
    if (!Number.isInteger(cpu) || cpu < 0 || cpu > maxPu || inMachine[cpu] === 0) {
      outside.push(cpu);
    } else if (selected[cpu] === 0) {
      selected[cpu] = 1;
      count++;
    }
  }
  if (outside.length > 0) {
    const sorted = [...new Set(outside)].sort((a, b) => a - b);
    const listed = sorted.every((c) => Number.isInteger(c) && c >= 0) ? formatIndexList(sorted) : sorted.join(',');
    throw new TopocollError('ETOPOLOGY', `PU numbers outside the machine: ${listed} (the machine has PUs ${formatIndexList(machine.pus)})`, {
      hint: `The affinity does not match the topology from ${machine.source}; check that it describes this machine.`,
    });
  }

  const tokens: LocalityToken[] = [];
  for (const kind of PMIX_ORDER) {
    const objects = machine.objects[kind];
    if (objects === undefined) continue;
    const indices: number[] = [];
    for (const object of objects) {
      if (object.pus.some((pu) => selected[pu] === 1)) indices.push(object.logicalIndex);
    }
    if (indices.length > 0) tokens.push({ code: LOCALITY_CODE[kind], indices });
  }
  return { locality: { tokens }, bound: count < machine.pus.length };
}
