import { TopocollError } from '../errors.js';
import { checkPosition, GroupStepWriter, type GroupView } from './group-steps.js';
import { rankBlock, type Step } from './schedule.js';

/** How one group reduce-scatters rank blocks. */
export type GroupReduceScatterAlgorithm = 'ring';

/**
 * Reduce-scatter among one group, on rank blocks (schedule.ts, "Rank blocks"): every position
 * starts with its partial values of every block in B; afterwards position i holds, in B, the
 * reduction over the group of the blocks of the global ranks `holds(i)` (ascending; at the top of
 * a hierarchy everything member i stands for below the group). Only for commutative operators:
 * a block is combined in the order it travels round the ring.
 *
 * - `ring` (pairwise): n − 1 rounds; in round t position i sends its partial values of chunk
 *   (i − t − 1) mod n to i + 1 and receives chunk (i − t − 2) mod n from i − 1, combining it
 *   into B; a chunk c is the blocks of holds(c). Chunk c leaves c + 1 first and reaches c last,
 *   every other position having added its values on the way. The blocks out and in are paired
 *   as one SendRecvReduce while both lists last, the rest plain Sends, then RecvReduces (as the
 *   allgather ring pairs them: both sides derive the lists from `holds`).
 * - n = 1: no steps.
 *
 * Every step's `level` is `view.level`; peers are global ranks (`view.members`).
 */
export function groupReduceScatterSteps(
  algorithm: GroupReduceScatterAlgorithm,
  view: GroupView,
  me: number,
  holds: (position: number) => readonly number[],
): Step[] {
  const n = view.members.length;
  checkPosition(n, me, 'own');
  if (algorithm !== 'ring') throw new TopocollError('ECONFIG', `"${String(algorithm)}" is not a reduce-scatter algorithm`, { hint: 'Use ring.' });
  const w = new GroupStepWriter(view);
  const mod = (a: number): number => ((a % n) + n) % n;
  for (let t = 0; t < n - 1; t++) {
    const out = holds(mod(me - t - 1));
    const into = holds(mod(me - t - 2));
    const to = mod(me + 1);
    const from = mod(me - 1);
    const pairs = Math.min(out.length, into.length);
    for (let k = 0; k < pairs; k++) w.sendRecvReduce(to, rankBlock(out[k]!), from, { first: into[k]!, count: 1 }, 0);
    for (let k = pairs; k < out.length; k++) w.send(to, rankBlock(out[k]!));
    for (let k = pairs; k < into.length; k++) w.recvReduce(from, 0, rankBlock(into[k]!));
  }
  return w.steps;
}
