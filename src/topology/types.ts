/**
 * The topology model shared by every source (hwloc XML, sysfs, PMIx locality strings) and by
 * the group planner. Index sets are sorted arrays of distinct non-negative integers.
 */

/** Hardware levels that can carry process groups, named as in the configuration. */
export type HardwareLevel = 'core' | 'l1' | 'l2' | 'l3' | 'numa' | 'socket';

/** Hardware levels bottom-up, as far as a fixed order goes (the planner orders by inclusion). */
export const HARDWARE_LEVELS: readonly HardwareLevel[] = ['core', 'l1', 'l2', 'l3', 'numa', 'socket'];

/**
 * Object kinds a topology knows about. `pu` (hardware thread) is below `core` and is never a
 * grouping level: two ranks on one core already form a `core` group.
 */
export type ObjectKind = HardwareLevel | 'pu';

/** PMIx locality-string code of each object kind (`SK0:L30:L20:L10:CR0:HT0:NM0`). */
export const LOCALITY_CODE: Readonly<Record<ObjectKind, LocalityCode>> = {
  socket: 'SK',
  l3: 'L3',
  l2: 'L2',
  l1: 'L1',
  core: 'CR',
  pu: 'HT',
  numa: 'NM',
};

export type LocalityCode = 'SK' | 'L3' | 'L2' | 'L1' | 'CR' | 'HT' | 'NM';

/** The order PMIx writes the codes in (topology depth, NUMA last with hwloc 2). */
export const LOCALITY_CODES: readonly LocalityCode[] = ['SK', 'L3', 'L2', 'L1', 'CR', 'HT', 'NM'];

/** One object of a machine: a package, cache, core, PU or NUMA node. */
export interface TopologyObject {
  /**
   * Logical index, as hwloc numbers objects: depth-first order among objects of its kind —
   * with NUMA nodes (memory children) numbered after the normal children of the same parent,
   * although the XML writes them first.
   */
  logicalIndex: number;
  /** OS index when the source gives one (`P#`), else undefined. */
  osIndex?: number;
  /** OS indices of the PUs this object covers, sorted. Empty for memory-only NUMA nodes. */
  pus: number[];
}

/** A machine: for every kind of object it has, its objects in logical order. */
export interface MachineTopology {
  /** Where it came from, for `topocoll topo`: e.g. `hwloc-xml:/path.xml`, `lstopo`, `sysfs`. */
  source: string;
  /** OS indices of every PU of the machine, sorted. */
  pus: number[];
  /** Objects per kind; a kind the machine does not report is absent. */
  objects: Partial<Record<ObjectKind, TopologyObject[]>>;
}

/**
 * Where one process runs, as the PMIx locality string says it: for each code present, the
 * logical indices of the objects of that kind the process's cpuset touches. Tokens keep the
 * order they were written in so a parsed string formats back to itself.
 */
export interface Locality {
  tokens: LocalityToken[];
}

export interface LocalityToken {
  code: LocalityCode;
  indices: number[];
}

/** Where one rank runs. */
export interface RankPlacement {
  rank: number;
  node: string;
  /** PMIx locality string; empty or undefined when unknown (e.g. an unbound process). */
  locality?: string;
}
