import { TopocollError } from '../errors.js';
import type { AllreduceAlgorithm } from './algorithm-choice.js';
import { checkPosition, GroupStepWriter, orderFor, type GroupView } from './group-steps.js';
import { log2, powerOfTwoFold, writeDoubling, writeHalving } from './power-of-two.js';
import type { Step } from './schedule.js';

/**
 * Allreduce among one group: afterwards every member holds, in B, the reduction of every
 * member's B in position order, bitwise the same on every member. Both algorithms first fold to
 * a power of two (`powerOfTwoFold`: in each pair (2i, 2i+1) the odd one sends its whole B to the
 * even one, which computes x_2i op x_2i+1, and sits out) and end by unfolding (the even one sends
 * the result back). In between, for active index i:
 * - `recursive-doubling`: at distances 1, 2, 4, … a SendRecvReduce of the whole segment with
 *   i XOR 2^j; both partners compute (lower run op higher run) from the same two operands, so
 *   they agree bit for bit;
 * - `rabenseifner`: reduce-scatter by recursive halving (SendRecvReduce, one rank reduces each
 *   block), then allgather by recursive doubling (SendRecv), which only copies.
 */
export function groupAllreduceSteps(algorithm: AllreduceAlgorithm, view: GroupView, me: number): Step[] {
  const n = view.members.length;
  checkPosition(n, me, 'own');
  const w = new GroupStepWriter(view);
  if (n === 1) return w.steps;
  const fold = powerOfTwoFold(n);
  const partner = fold.partnerOf(me);
  const i = fold.indexOf(me);
  if (i < 0) {
    w.send(partner);
    w.recv(partner);
    return w.steps;
  }
  if (partner >= 0) w.recvReduce(partner, orderFor(false));
  if (algorithm === 'recursive-doubling') recursiveDoubling(w, fold.active, fold.positionOf, i);
  else if (algorithm === 'rabenseifner') {
    writeHalving(w, fold, i);
    writeDoubling(w, fold, i);
  } else badAlgorithm(algorithm);
  if (partner >= 0) w.send(partner);
  return w.steps;
}

function recursiveDoubling(w: GroupStepWriter, active: number, positionOf: (i: number) => number, i: number): void {
  for (let j = 0; j < log2(active); j++) {
    const q = i ^ (1 << j);
    w.sendRecvReduce(positionOf(q), undefined, positionOf(q), { first: 0, count: 1 }, orderFor(q < i));
  }
}

function badAlgorithm(a: never): never {
  throw new TopocollError('ECONFIG', `"${String(a)}" is not an allreduce algorithm`, { hint: 'Use recursive-doubling or rabenseifner.' });
}
