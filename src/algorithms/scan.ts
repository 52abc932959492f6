import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import { StepKind, type BlockRange, type Schedule, type Step } from './schedule.js';

/**
 * Inclusive and exclusive scans (MPI_Scan, MPI_Exscan) over a plan whose groups each cover
 * consecutive ranks (`rankOrderedPlan`, src/runtime/collective-plans.ts): rank r ends with
 * x0 op x1 op … op xr (scan) or x0 op … op x(r−1) (exscan), combined in rank order, so any
 * associative operator is right, commutative or not. Every message runs inside a group of the
 * plan (only there are ranks linked: channels inside a node, TCP between the node leaders).
 *
 * **One schedule for both.** It leaves every rank r ≥ 1 with its exclusive prefix E(r) =
 * x0 op … op x(r−1); the executor then hands E(r) to exscan, and E(r) op xr to scan (one local
 * combine, the input on the right). Rank 0 has no E: its scan result is x0, its exscan `recv`
 * is left untouched (MPI leaves it undefined; we do not write it).
 *
 * **Slots.** B is `slots(plan)` = L + 1 slots of the call's n elements (L: the plan's levels),
 * each a block of the phase (range `{ first: slot, count: 1, of: L + 1 }`). The phase runs in
 * column segments (CollectivePlans.scan): the executor lays B out segment by segment, each
 * segment's L + 1 slots side by side, so a block of a segment is that segment's column of the
 * slot, and every segment runs the whole schedule below. Slot 0
 * starts as the input, slot d is the rank's value in the d-th group of its chain (bottom-up),
 * the last slot (L) ends as E. A message may land in another slot than it left (every slot has
 * n elements; the executor checks only the length).
 *
 * **Groups.** A group g has members m1 < … < mk (m1 its leader, the lowest rank); member mi
 * covers the consecutive ranks Ci below g (itself and what it leads below), C1 < … < Ck, and
 * brings Ti, the combination of Ci. A rank leads every group of its chain but the last, so it
 * covers ranks from itself upward: E(mi) is E(m1) op T1 op … op T(i−1).
 *
 * **Up, bottom-up along each rank's chain** — in each group g (the rank's slot d):
 * 1. inclusive scan, recursive doubling (Hillis–Steele): for δ = 1, 2, 4, … < k, mi sends its
 *    slot d to m(i+δ), then combines m(i−δ)'s on its LEFT (RecvReduce, order 1). mi ends with
 *    Ii = T1 op … op Ti; the leader only sends (its slot keeps T1). In the top group (the last
 *    of its leader's chain) nobody reads Ik, so mk stays out of it: the doubling runs among
 *    m1 … m(k−1) (with two members, no round at all).
 * 2. rotation: mi (i < k) sends Ii to m(i+1), which receives it into its last slot (Xi =
 *    I(i−1), the exclusive prefix inside g); mk sends Ik, g's total, to the leader's slot d + 1
 *    — its T in its next group — unless g is the leader's last group. The last member receives
 *    before it sends, so no cycle of sends waits on itself.
 * A member that is not g's leader has no group above g: its up part ends with Xi.
 *
 * **Down, top-down** — a rank r that is not a group leader of its last group first receives
 * E(m1) from that group's leader m1 and combines it on the LEFT of Xr (RecvReduce, order 1):
 * E(r) = E(m1) op Xr — unless m1 is rank 0 (E(0) is empty, Xr is already E(r)). Then, as leader
 * of the groups below, from the highest down, it sends E(r) to their other members (rank 0 sends
 * nothing).
 *
 * **Cost.** Per group of k members ⌈log2 k⌉ + 1 rounds up (the top group ⌈log2 (k − 1)⌉ + 1)
 * and one down; per level of the plan
 * the rounds add up; every segment's messages go through them all, successive segments
 * pipelining through the rounds. Memory: (L + 1)·n elements of scratch.
 *
 * **Deadlock freedom** (the simulator checks it with rendezvous sends): up, a rank waits only on
 * members of its groups that are below it or in groups below; within a group, sends go up the
 * member order and only the last member sends down (to the leader, which waits for it last, or
 * not at all); down is a tree from rank 0. Messages between two ranks (who share one group) are
 * received in the order they were sent.
 */

/** The number of slots of B on every rank: one per level of the plan and the exclusive prefix. */
export function scanSlots(plan: GroupPlan): number {
  return plan.levels.length + 1;
}

/** `rank`'s steps of a scan or an exscan over `plan` (which must keep the rank order; see above). */
export function scanSchedule(plan: GroupPlan, rank: number): Schedule {
  const size = plan.size;
  if (!Number.isInteger(rank) || rank < 0 || rank >= size) throw new TopocollError('EINVAL', `scan: rank ${rank} of ${size} ranks`);
  const slots = scanSlots(plan);
  const slot = (s: number): BlockRange => ({ first: s, count: 1, of: slots });
  const last = slot(slots - 1);
  const chain = plan.chain(rank);
  const levelOf = (g: Group) => plan.levels.indexOf(g.level);
  // Whether g is the last group of its leader's chain (its total goes nowhere).
  const topOfLeader = (g: Group) => plan.chain(g.leader).at(-1) === g;
  const steps: Step[] = [];
  chain.forEach((g, d) => {
    const level = levelOf(g);
    const k = g.members.length;
    const i = g.members.indexOf(rank);
    const own = slot(d);
    const toLeader = !topOfLeader(g);
    // The members taking part in the doubling: all, or in the top group all but the last, whose
    // inclusive value nobody reads (its total goes nowhere).
    const doubling = toLeader ? k : k - 1;
    for (let delta = 1; delta < doubling; delta *= 2) {
      if (i + delta < doubling) steps.push({ kind: StepKind.Send, peer: g.members[i + delta]!, level, range: own });
      if (i - delta >= 0 && i < doubling) steps.push({ kind: StepKind.RecvReduce, peer: g.members[i - delta]!, level, range: own, order: 1 });
    }
    if (i === 0) {
      steps.push({ kind: StepKind.Send, peer: g.members[1]!, level, range: own });
      if (toLeader) steps.push({ kind: StepKind.Recv, peer: g.members[k - 1]!, level, range: slot(d + 1) });
    } else if (i < k - 1) {
      steps.push({ kind: StepKind.Send, peer: g.members[i + 1]!, level, range: own });
      steps.push({ kind: StepKind.Recv, peer: g.members[i - 1]!, level, range: last });
    } else {
      steps.push({ kind: StepKind.Recv, peer: g.members[i - 1]!, level, range: last });
      if (toLeader) steps.push({ kind: StepKind.Send, peer: g.leader, level, range: own });
    }
  });
  // Down: E from the leader of the last group (unless this rank leads it: only rank 0 leads its
  // last group), then to the groups it leads, highest first.
  const top = chain.at(-1);
  if (top !== undefined && top.leader !== rank && top.leader !== 0)
    steps.push({ kind: StepKind.RecvReduce, peer: top.leader, level: levelOf(top), range: last, order: 1 });
  if (rank !== 0) {
    for (let d = chain.length - 1; d >= 0; d--) {
      const g = chain[d]!;
      if (g.leader !== rank) continue;
      for (const m of g.members) if (m !== rank) steps.push({ kind: StepKind.Send, peer: m, level: levelOf(g), range: last });
    }
  }
  return { collective: 'scan', root: 0, steps };
}
