import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import { binomialTree } from './binomial-tree.js';
import { StepKind, encodeSchedule, type CollectiveKind, type Schedule, type Step } from './schedule.js';

/**
 * Hierarchical bcast and reduce schedules over the groups of a `GroupPlan`, for any root, with
 * a binomial tree inside every group and no extra hop through rank 0: every message travels
 * between two members of one group, so only in-group links are used.
 *
 * Coverage. A member m of a group G covers m itself and everything m leads below G: the members
 * of m's lower groups and, recursively, what they cover. Each rank ≠ 0 is a non-leader in
 * exactly one group (the top of its chain), so coverage is a tree and the groups that cover a
 * root r form one path: all of chain(r), then, for r's top-group leader a1, the groups of
 * chain(a1) above r's top group, then those of its leader a2 above a1's top group, … up to 0.
 * The **source** of a group for root r is the member covering r if the group covers r, else its
 * leader; the binomial tree of every group is rooted at its source. A reduce's **destination**
 * of a group is its source.
 *
 * For a rank x ≠ r, let R be the lowest group of x's chain whose source is not x (the lowest
 * group covering r, else the top of the chain — x leads and is the source of every group below
 * its top that does not cover r). x is the source of every other group of its chain.
 *
 * Bcast: r sends to its root-children in all its groups, top-down, and receives nothing. x ≠ r
 * receives once, in R, from its binomial parent; sends to its children in R; then to its
 * root-children in every other group of its chain, top-down: the highest groups span the largest
 * subtrees and the slowest links, so their data leaves first (the mirror of the reduce order).
 *
 * Reduce: the mirror. x receives-and-reduces (`RecvReduce`) from its children in the reduce
 * tree in every group of its chain — its binomial children in R, its root-children elsewhere —
 * groups in chain order bottom-up, children smallest subtree first within a group; then it sends
 * once, in R, to its binomial parent. r does the receives only. Since every rank's receives all
 * precede its one send and the messages form a tree, even a rendezvous transport cannot
 * deadlock (induction on subtree height); the order only decides who waits: lower levels and
 * small subtrees finish first.
 */

/** Groups of the plan that cover `root`, each with the member covering it (the source). */
export function coveringSources(plan: GroupPlan, root: number): Map<Group, number> {
  checkRoot(plan, root);
  const sources = new Map<Group, number>();
  let a = root;
  let from: Group | undefined;
  for (;;) {
    const chain = plan.chain(a);
    // Above `from` (the top group of the previous path rank, led by a), a covers root.
    for (let i = from === undefined ? 0 : chain.indexOf(from) + 1; i < chain.length; i++) sources.set(chain[i]!, a);
    const top = chain[chain.length - 1];
    if (top === undefined || top.leader === a) return sources;
    from = top;
    a = top.leader;
  }
}

/**
 * How a bcast moves data inside a group: `shmGroup(g)` returns the id under which the rank
 * registered `g` with the shared-memory engine (S0) when the group broadcasts through it, or
 * undefined for point-to-point binomial trees.
 */
export interface BcastOptions {
  shmGroup?: (g: Group) => number | undefined;
}

/** The steps of `rank` in a bcast from `root`. */
export function bcastSchedule(plan: GroupPlan, rank: number, root: number, options: BcastOptions = {}): Schedule {
  const ctx = context(plan, rank, root);
  const steps: Step[] = [];
  // A shared-memory group is one step for every member; its source is where the data enters.
  const shmStep = (g: Group): boolean => {
    const id = options.shmGroup?.(g);
    if (id === undefined) return false;
    steps.push({ kind: StepKind.ShmBcast, peer: ctx.sourceOf(g), level: ctx.level(g), group: id });
    return true;
  };
  const sendAsSource = (g: Group): void => {
    if (shmStep(g)) return;
    const me = position(g, rank);
    for (const c of binomialTree(g.members.length, me, me).children) steps.push(step(StepKind.Send, g.members[c]!, ctx.level(g)));
  };
  const { chain, receiveAt: r } = ctx;
  if (r >= 0 && !shmStep(chain[r]!)) {
    const g = chain[r]!;
    const tree = binomialTree(g.members.length, position(g, ctx.sourceOf(g)), position(g, rank));
    steps.push(step(StepKind.Recv, g.members[tree.parent]!, ctx.level(g)));
    for (const c of tree.children) steps.push(step(StepKind.Send, g.members[c]!, ctx.level(g)));
  }
  // Then every group this rank is the source of, top-down: the highest levels hold the largest
  // subtrees and the slowest links, so their data leaves first (the mirror of the reduce order).
  for (let i = chain.length - 1; i >= 0; i--) if (i !== r) sendAsSource(chain[i]!);
  return { collective: 'bcast', root, steps };
}

/** The steps of `rank` in a reduce to `root`. */
export function reduceSchedule(plan: GroupPlan, rank: number, root: number): Schedule {
  const ctx = context(plan, rank, root);
  const steps: Step[] = [];
  const { chain, receiveAt: r } = ctx;
  for (const g of chain) {
    const tree = binomialTree(g.members.length, position(g, ctx.sourceOf(g)), position(g, rank));
    // Children are listed largest subtree first; a reduce waits for the smallest first.
    for (let k = tree.children.length - 1; k >= 0; k--) {
      steps.push(step(StepKind.RecvReduce, g.members[tree.children[k]!]!, ctx.level(g)));
    }
  }
  if (r >= 0) {
    const g = chain[r]!;
    const tree = binomialTree(g.members.length, position(g, ctx.sourceOf(g)), position(g, rank));
    steps.push(step(StepKind.Send, g.members[tree.parent]!, ctx.level(g)));
  }
  return { collective: 'reduce', root, steps };
}

/** The global leader: rank 0, the lowest rank, leader of every group it belongs to. */
export const GLOBAL_LEADER = 0;

/**
 * Allreduce = reduce to the global leader, then bcast from it. A barrier runs the same two
 * schedules with zero bytes.
 */
export function allreduceSchedules(plan: GroupPlan, rank: number): { reduce: Schedule; bcast: Schedule } {
  return { reduce: reduceSchedule(plan, rank, GLOBAL_LEADER), bcast: bcastSchedule(plan, rank, GLOBAL_LEADER) };
}

/**
 * One rank's schedules, built on first use and then found in O(1) by (collective, root).
 * A plan change (levels switched on or off) needs a new cache.
 */
export class ScheduleCache {
  private readonly schedules = new Map<number, Schedule>();
  private readonly encoded = new Map<number, Int32Array>();

  constructor(
    readonly plan: GroupPlan,
    readonly rank: number,
    private readonly bcastOptions: BcastOptions = {},
  ) {
    plan.chain(rank); // validates rank
  }

  get(collective: CollectiveKind, root: number): Schedule {
    const key = this.key(collective, root);
    let s = this.schedules.get(key);
    if (s === undefined) {
      s = collective === 'bcast' ? bcastSchedule(this.plan, this.rank, root, this.bcastOptions) : reduceSchedule(this.plan, this.rank, root);
      this.schedules.set(key, s);
    }
    return s;
  }

  /** The encoded form (`encodeSchedule`) of `get(collective, root)`, also cached. */
  getEncoded(collective: CollectiveKind, root: number): Int32Array {
    const key = this.key(collective, root);
    let e = this.encoded.get(key);
    if (e === undefined) {
      e = encodeSchedule(this.get(collective, root));
      this.encoded.set(key, e);
    }
    return e;
  }

  bcast(root: number): Schedule {
    return this.get('bcast', root);
  }

  reduce(root: number): Schedule {
    return this.get('reduce', root);
  }

  allreduce(): { reduce: Schedule; bcast: Schedule } {
    return { reduce: this.get('reduce', GLOBAL_LEADER), bcast: this.get('bcast', GLOBAL_LEADER) };
  }

  /** Number of schedules built so far. */
  get size(): number {
    return this.schedules.size;
  }

  clear(): void {
    this.schedules.clear();
    this.encoded.clear();
  }

  private key(collective: CollectiveKind, root: number): number {
    if (collective !== 'bcast' && collective !== 'reduce') {
      throw new TopocollError('EINVAL', `unknown collective ${String(collective)}`, { rank: this.rank });
    }
    return root * 2 + (collective === 'reduce' ? 1 : 0);
  }
}

interface Context {
  chain: Group[];
  /** Index in `chain` of R (the one receive of a bcast, the one send of a reduce); −1 at the root. */
  receiveAt: number;
  sourceOf(g: Group): number;
  level(g: Group): number;
}

function context(plan: GroupPlan, rank: number, root: number): Context {
  const chain = plan.chain(rank);
  checkRoot(plan, root);
  const sources = coveringSources(plan, root);
  const sourceOf = (g: Group): number => sources.get(g) ?? g.leader;
  let receiveAt = -1;
  if (rank !== root) {
    receiveAt = chain.findIndex((g) => sourceOf(g) !== rank);
    if (receiveAt < 0 && chain.length > 0) {
      // Unreachable for a plan built by planGroups: the top group of a rank ≠ 0 is led by another rank.
      throw new TopocollError('EINVAL', `rank ${rank} is the source of every group of its chain for root ${root}`, { rank });
    }
  }
  const levelIndex = new Map(plan.levels.map((name, i) => [name, i]));
  return { chain, receiveAt, sourceOf, level: (g) => levelIndex.get(g.level) ?? -1 };
}

function checkRoot(plan: GroupPlan, root: number): void {
  if (!Number.isInteger(root) || root < 0 || root >= plan.size) {
    throw new TopocollError('EINVAL', `root ${root} is outside 0…${plan.size - 1}`, { rank: root });
  }
}

/** Position of `rank` among the (ascending) members of `g`. */
function position(g: Group, rank: number): number {
  const m = g.members;
  let lo = 0;
  let hi = m.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = m[mid]!;
    if (v === rank) return mid;
    if (v < rank) lo = mid + 1;
    else hi = mid - 1;
  }
  throw new TopocollError('EINVAL', `rank ${rank} is not a member of ${g.level} group ${g.unit}`, { rank, level: g.level });
}

function step(kind: StepKind, peer: number, level: number): Step {
  return { kind, peer, level };
}
