import type { RankPlacement } from '../../src/topology/types.js';

/**
 * Locality string of a rank bound to core `c` of a node whose sockets have `coresPerSocket`
 * cores, one NUMA node and one L3 per socket, private L1/L2 per core, one PU per core.
 */
export function coreLocality(c: number, coresPerSocket: number): string {
  const s = Math.floor(c / coresPerSocket);
  return `SK${s}:L3${s}:L2${c}:L1${c}:CR${c}:HT${c}:NM${s}`;
}

/** `nodes` × `ppn` ranks mapped by core: rank r on node floor(r/ppn), core r mod ppn. */
export function byCore(nodes: string[], ppn: number, coresPerSocket: number): RankPlacement[] {
  return nodes.flatMap((node, k) => Array.from({ length: ppn }, (_, j) => ({ rank: k * ppn + j, node, locality: coreLocality(j, coresPerSocket) })));
}

/** from, from+step, … ≤ to */
export const range = (from: number, to: number, step = 1): number[] => Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step);

/** Two-digit node numbers: node01 … */
export const pad = (n: number): string => String(n).padStart(2, '0');
