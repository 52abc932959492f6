import { statfsSync } from 'node:fs';
import { totalmem } from 'node:os';

/** What bounds a node's shared memory: the size of /dev/shm (the tmpfs segments live in) and its memory, bytes. */
export interface NodeMemory {
  devShmBytes: number;
  memoryBytes: number;
}

let cached: NodeMemory | undefined;

/** This node's; read once per process. */
export function nodeMemory(): NodeMemory {
  if (cached === undefined) {
    let devShmBytes = Infinity;
    try {
      const s = statfsSync('/dev/shm');
      devShmBytes = s.blocks * s.bsize;
    } catch {
      // No /dev/shm to ask: the node's memory alone bounds the budget.
    }
    cached = { devShmBytes, memoryBytes: totalmem() };
  }
  return cached;
}

/**
 * The default shm.budgetBytes: half of the smaller of /dev/shm and the node's memory. A segment
 * is sparse (pages exist once touched), so the budget bounds what a node's collectives and
 * windows may claim, not what they use; half leaves the rest of /dev/shm to other programs.
 */
export function autoShmBudgetBytes(node: NodeMemory = nodeMemory()): number {
  return Math.floor(Math.min(node.devShmBytes, node.memoryBytes) / 2);
}
