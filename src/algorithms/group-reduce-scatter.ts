import { TopocollError } from '../errors.js';
import { checkPosition, GroupStepWriter, type GroupView } from './group-steps.js';
import { rankBlock, type Step } from './schedule.js';

/** How one group reduce-scatters rank blocks. */
export type GroupReduceScatterAlgorithm = 'ring' | 'recursive-halving';

/**
 * Reduce-scatter among one group, on rank blocks (schedule.ts, "Rank blocks"): every position
 * starts with its partial values of every block in B; afterwards position i holds, in B, the
 * reduction over the group of the blocks of the global ranks `holds(i)` (ascending; at the top of
 * a hierarchy everything member i stands for below the group). Only for commutative operators:
 * a block is combined in the order it travels. A chunk c is the blocks of holds(c).
 *
 * - `ring` (pairwise): n − 1 rounds; in round t position i sends its partial values of chunk
 *   (i − t − 1) mod n to i + 1 and receives chunk (i − t − 2) mod n from i − 1, combining it
 *   into B. Chunk c leaves c + 1 first and reaches c last, every other position having added its
 *   values on the way.
 * - `recursive-halving` (Thakur et al. 2005 §4.1, the reduce-scatter half of Rabenseifner's
 *   allreduce): with n' = 2^⌊log2 n⌋ and rem = n − n', first the fold: each even position
 *   p < 2·rem sends every chunk to p + 1, which combines them, and waits; the n' others are
 *   virtual positions v (p + 1 → v = p/2 for the pairs, p → v = p − rem above them), v < rem
 *   standing for chunks 2v and 2v + 1, the others for chunk v + rem. Then log2 n' rounds: with
 *   d = n'/2, n'/4, …, 1, v and v XOR d split the range of virtual positions they share in two
 *   halves, each sending the chunks of the other's half and combining those of its own half it
 *   receives; v ends with its own chunks. Last, v < rem sends chunk 2v, reduced, to position 2v.
 * - n = 1: no steps.
 *
 * In every exchange the chunks out and in are paired as one SendRecvReduce per block while both
 * lists last, the rest plain Sends, then RecvReduces (both sides derive the lists from `holds`,
 * so the pairs match: as the allgather ring pairs them).
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
  const w = new GroupStepWriter(view);
  if (algorithm === 'ring') ring(w, n, me, holds);
  else if (algorithm === 'recursive-halving') recursiveHalving(w, n, me, holds);
  else throw new TopocollError('ECONFIG', `"${String(algorithm)}" is not a reduce-scatter algorithm`, { hint: 'Use ring or recursive-halving.' });
  return w.steps;
}

/** Sends the blocks `out` to `to` and receives and combines the blocks `into` from `from`, paired while both last. */
function exchange(w: GroupStepWriter, to: number, out: readonly number[], from: number, into: readonly number[]): void {
  const pairs = Math.min(out.length, into.length);
  for (let k = 0; k < pairs; k++) w.sendRecvReduce(to, rankBlock(out[k]!), from, { first: into[k]!, count: 1 }, 0);
  for (let k = pairs; k < out.length; k++) w.send(to, rankBlock(out[k]!));
  for (let k = pairs; k < into.length; k++) w.recvReduce(from, 0, rankBlock(into[k]!));
}

function ring(w: GroupStepWriter, n: number, me: number, holds: (position: number) => readonly number[]): void {
  const mod = (a: number): number => ((a % n) + n) % n;
  for (let t = 0; t < n - 1; t++) exchange(w, mod(me + 1), holds(mod(me - t - 1)), mod(me - 1), holds(mod(me - t - 2)));
}

function recursiveHalving(w: GroupStepWriter, n: number, me: number, holds: (position: number) => readonly number[]): void {
  if (n === 1) return;
  let active = 1;
  while (active * 2 <= n) active *= 2;
  const rem = n - active;
  // Virtual position v's real position, and the chunks it stands for.
  const real = (v: number): number => (v < rem ? 2 * v + 1 : v + rem);
  const chunks = (v: number): number[] => (v < rem ? [2 * v, 2 * v + 1] : [v + rem]);
  const blocks = (lo: number, hi: number): number[] => {
    const out: number[] = [];
    for (let v = lo; v < hi; v++) for (const c of chunks(v)) out.push(...holds(c));
    return out;
  };
  if (me < 2 * rem && me % 2 === 0) {
    // Folded: everything to the next position, which hands back this position's chunk reduced.
    for (const b of blocks(0, active)) w.send(me + 1, rankBlock(b));
    for (const b of holds(me)) w.recv(me + 1, rankBlock(b));
    return;
  }
  if (me < 2 * rem) for (const b of blocks(0, active)) w.recvReduce(me - 1, 0, rankBlock(b));
  const v = me < 2 * rem ? (me - 1) / 2 : me - rem;
  let lo = 0;
  let hi = active;
  for (let d = active / 2; d >= 1; d /= 2) {
    const mid = lo + d;
    const peer = real(v ^ d);
    // Keep the half holding v; send the other.
    const [keepLo, keepHi, sendLo, sendHi] = v < mid ? [lo, mid, mid, hi] : [mid, hi, lo, mid];
    exchange(w, peer, blocks(sendLo, sendHi), peer, blocks(keepLo, keepHi));
    lo = keepLo;
    hi = keepHi;
  }
  if (v < rem) for (const b of holds(2 * v)) w.send(2 * v, rankBlock(b));
}
