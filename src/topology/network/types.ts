/**
 * Where compute nodes sit in the network: for every node, its switches bottom-up.
 */

/** Where a fact was read from, for error messages. */
export interface SourceLine {
  file: string;
  line: number;
}

/** One node's switch path. */
export interface NodeNetworkPath {
  node: string;
  /**
   * Switch names bottom-up: index 0 is the leaf switch (level `switch1`), index 1 its parent
   * (`switch2`), … An `undefined` entry means the node has no switch at that level (an
   * unbalanced tree); the planner then uses the node's unit of the nearest level below.
   */
  switches: (string | undefined)[];
  /** Where the node was declared, when it came from a file. */
  declaredAt?: SourceLine;
}

/** The whole network as one source describes it. */
export interface NetworkTopology {
  /** `simple:<file>`, `slurm-topology.conf:<file>` or `slurm-addr` — shown by the CLI. */
  source: string;
  /** The file the description was read from (absent for `slurm-addr`), for error messages. */
  file?: string;
  /** Number of switch levels K (the longest path); levels are `switch1` … `switchK`. */
  levels: number;
  /** Every node the source knows, by name. */
  nodes: Map<string, NodeNetworkPath>;
  /** Non-fatal observations (e.g. a switch with several parents), one line each. */
  warnings: string[];
}
