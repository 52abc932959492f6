import { TopocollError } from '../errors.js';
import { formatAlgorithm, type GroupBarrierAlgorithm } from './algorithm-choice.js';
import { checkPosition, GroupStepWriter, type GroupView } from './group-steps.js';
import { knomialTree } from './knomial-tree.js';
import type { Step } from './schedule.js';

export type { GroupBarrierAlgorithm } from './algorithm-choice.js';

/** One member's part of a group barrier: `arrive` first, `release` later (see `groupBarrierSteps`). */
export interface GroupBarrierSteps {
  arrive: Step[];
  release: Step[];
}

/**
 * Barrier inside one group, in two parts, for the member at position `me`; position 0 is the
 * group's leader. A barrier call moves no data (0 elements): every Send, Recv and SendRecv
 * carries zero bytes, but a receive still waits for the matching message, and that wait is the
 * whole synchronisation. The parts:
 * - `arrive`: afterwards the leader knows (has in its causal past) that every member entered the
 *   arrive part — with `dissemination` every member knows it;
 * - `release`: the leader tells every member; a member's release ends only after the leader's
 *   release began. A hierarchical barrier (hierarchical.ts, `barrierSchedules`) runs the arrive
 *   parts of a rank's groups bottom-up and, after its top group, the release parts top-down; a
 *   single group's barrier is its arrive then its release (the release may be left out where
 *   `arriveInformsAll(algorithm)`).
 *
 * The algorithms (S4):
 * - `central-counter`: arrive: every member sends the leader one message; the leader receives
 *   from positions 1, …, n−1 in ascending order. Release: the leader sends to 1, …, n−1 in
 *   ascending order; each member receives once.
 * - `{ combiningTree: K }` (`combining-tree:K`): the classic combining tree of fan-in K — groups
 *   of K positions combine at their lowest one, which goes on up — which is the k-nomial tree of
 *   radix K rooted at position 0 (knomial-tree.ts; K = 2: the binomial tree). Each node has at
 *   most K − 1 children per level and ⌈log_K n⌉ levels: S4's "n-ary" tree, whose per-level cost
 *   (o_s + L + f_r(n−2) + o_r) counts n − 1 receives, so barrier-model.ts's formula models this
 *   tree with n = K. Arrive: receive from every child, smallest subtree first (those finish
 *   first; the reverse of the bcast order), then send to the parent. Release: the mirror —
 *   receive from the parent, then send to every child, largest subtree first.
 * - `dissemination`: ⌈log2 n⌉ rounds; in round k member i runs one SendRecv: send to
 *   (i + 2^k) mod n, then receive from (i − 2^k) mod n. After round k, i knows that members
 *   i, i − 1, …, i − 2^(k+1) + 1 (mod n) entered, so after the last round (2^⌈log2 n⌉ ≥ n)
 *   every member knows every member did: that is the whole arrive part. No ordered pair of
 *   members meets twice (2^k ≢ 2^j mod n for distinct 2^k, 2^j < n), so a message can only meet
 *   the receive it was meant for. Release (only needed when the group is not the top of the
 *   hierarchy): a binomial tree from the leader (as `combining-tree:2`'s release), ⌈log2 n⌉
 *   message latencies rather than the n − 1 sends of the leader alone, matching the
 *   dissemination's logarithmic growth in the large groups it is chosen for.
 * - n = 1: no steps in either part.
 *
 * Deadlock freedom, with eager or rendezvous plain Sends (SendRecv sends are always buffered,
 * schedule.ts "Exchanges"): in the trees (central-counter is the tree of depth 1), a node's
 * arrive receives wait only for its children's arrive sends, which wait only for their own
 * subtrees — induction on subtree height; each member receives exactly the messages sent to
 * it, in the order they are sent. The release is the same induction from the root down. In the
 * dissemination, round k's receive waits for (i − 2^k)'s round-k send, which (being buffered)
 * waits only for that member's rounds before k — induction on k.
 *
 * Every step's `level` is `view.level`; peers are global ranks (`view.members`).
 */
export function groupBarrierSteps(algorithm: GroupBarrierAlgorithm, view: GroupView, me: number): GroupBarrierSteps {
  const n = view.members.length;
  checkPosition(n, me, 'own');
  checkAlgorithm(algorithm);
  const arrive = new GroupStepWriter(view);
  const release = new GroupStepWriter(view);
  if (n === 1) return { arrive: arrive.steps, release: release.steps };
  if (algorithm === 'central-counter') {
    if (me === 0) {
      for (let p = 1; p < n; p++) arrive.recv(p);
      for (let p = 1; p < n; p++) release.send(p);
    } else {
      arrive.send(0);
      release.recv(0);
    }
  } else if (algorithm === 'dissemination') {
    for (let d = 1; d < n; d *= 2) arrive.sendRecv((me + d) % n, undefined, (me - d + n) % n, { first: 0, count: 1 });
    treeRelease(release, n, 2, me);
  } else {
    const node = knomialTree(n, algorithm.combiningTree, 0, me);
    for (let k = node.children.length - 1; k >= 0; k--) arrive.recv(node.children[k]!);
    if (node.parent >= 0) arrive.send(node.parent);
    treeRelease(release, n, algorithm.combiningTree, me);
  }
  return { arrive: arrive.steps, release: release.steps };
}

/** The arrive part of `groupBarrierSteps`. */
export function groupBarrierArriveSteps(algorithm: GroupBarrierAlgorithm, view: GroupView, me: number): Step[] {
  return groupBarrierSteps(algorithm, view, me).arrive;
}

/** The release part of `groupBarrierSteps`. */
export function groupBarrierReleaseSteps(algorithm: GroupBarrierAlgorithm, view: GroupView, me: number): Step[] {
  return groupBarrierSteps(algorithm, view, me).release;
}

/**
 * Whether the arrive part alone leaves every member knowing that every member arrived
 * (`dissemination`), so a group at the top of a hierarchy needs no release; the trees only
 * inform the leader.
 */
export function arriveInformsAll(algorithm: GroupBarrierAlgorithm): boolean {
  return algorithm === 'dissemination';
}

/** Receive from the parent, then send to the children, largest subtree first (the k-nomial tree rooted at 0). */
function treeRelease(w: GroupStepWriter, n: number, radix: number, me: number): void {
  const node = knomialTree(n, radix, 0, me);
  if (node.parent >= 0) w.recv(node.parent);
  for (const c of node.children) w.send(c);
}

function checkAlgorithm(a: GroupBarrierAlgorithm): void {
  if (a === 'central-counter' || a === 'dissemination') return;
  const hint = 'Use central-counter, combining-tree:K (K ≥ 2) or dissemination.';
  if (typeof a !== 'object' || a === null || !('combiningTree' in a)) {
    const text = typeof a === 'object' && a !== null ? ('knomial' in a ? formatAlgorithm(a) : JSON.stringify(a)) : String(a);
    throw new TopocollError('ECONFIG', `"${text}" is not a barrier algorithm`, { hint });
  }
  const k = a.combiningTree;
  if (!Number.isInteger(k) || k < 2) throw new TopocollError('ECONFIG', `combining-tree fan-in ${k} is not an integer ≥ 2`, { hint });
}
