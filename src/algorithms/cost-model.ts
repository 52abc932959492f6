import { TopocollError } from '../errors.js';
import type {
  AllreduceAlgorithm,
  BcastAlgorithm,
  GroupAllgatherAlgorithm,
  GroupBarrierAlgorithm,
  GroupGatherAlgorithm,
  ReduceAlgorithm,
} from './algorithm-choice.js';
import { predictBarrierUs } from './barrier-model.js';
import type { GroupReduceScatterAlgorithm } from './group-reduce-scatter.js';
import { binomialSubtreeSize, binomialTree } from './binomial-tree.js';
import { knomialTree } from './knomial-tree.js';

/**
 * The cost model behind every `auto` choice (issue 18; S4's method generalised): one formula per
 * algorithm of every collective inside one group, in LogGP terms (Alexandrov et al., "LogGP",
 * 1995; S1 gives the binomial bcast in this form), evaluated on a level's measured link
 * parameters, and composed over the levels of a plan by selection.ts.
 *
 * Notation (µs; bytes; per member of a group of n): a message of b bytes between two ranks costs
 *   p2p(b)      = o_s + b·G + L + o_r        sent, on the wire, received;
 *   send(b)     = max(g, o_s + b·G)          before the same rank can start its next send;
 *   exchange(b) = o_s + L + o_r + b·Gx       a pairwise exchange of b bytes each way (SendRecv:
 *                                             Gx = G on a full-duplex link where another agent
 *                                             moves the bytes, up to 2G where the ranks' own
 *                                             cores copy both directions);
 *   combine(b)  = b / combineBytesPerUs      applying the operator to b bytes.
 * ⌈log2 n⌉ is written lg; n' = 2^⌊log2 n⌋ and rem = n − n' (power-of-two.ts's fold).
 *
 * Bcast (m bytes, from one member):
 * - flat: (n − 2)·send(m) + p2p(m) — the source sends to every other member in turn;
 * - binomial, knomial:K: evaluated on the tree itself (binomial-tree.ts, knomial-tree.ts): a
 *   member ready at t starts its j-th send (children in send order, j = 0, 1, …) at t + j·send(m)
 *   and that child is ready p2p(m) later; the time is the last member's. (binomial, n = 2^k:
 *   k·p2p(m) while send(m) ≤ p2p(m).) S1's LogP binomial bcast is this with G = 0;
 * - scatter-allgather (van de Geijn, Barnett et al. 1994; Thakur et al. 2005 §3.1): the binomial
 *   scatter on the tree, each child receiving its subtree's blocks (subtree·m/n bytes) in one
 *   message, then (n − 1)·exchange(m/n) for the ring;
 * - shm: the S0 engine's own model (shm-bcast-model.ts), given by the level.
 *
 * Reduce (m bytes to one member):
 * - flat: p2p(m) + combine(m) + (n − 2)·(max(g, o_r + m·G) + combine(m)) — the messages arrive
 *   together and the destination takes them one at a time;
 * - binomial, knomial:K: on the tree: a member starts sending to its parent when its last child's
 *   data is combined; it takes its children smallest subtree first, each when it has arrived
 *   (child's finish + o_s + m·G + L), paying o_r for the first and max(g, o_r + m·G) for each
 *   further one, plus combine(m) — so a tree of one level (radix ≥ n) predicts what flat does;
 * - rabenseifner (Rabenseifner 2004; Thakur et al. 2005 §4.2): with rem > 0 first p2p(m) +
 *   combine(m) (the fold), then recursive halving Σ_{j=1..log2 n'} exchange(m/2^j) +
 *   combine(m/2^j), then the binomial gather Σ_{j=0..log2 n'−1} p2p(m·2^j/n');
 * - shm (every member combines a slice through the S0 queues): given by the level.
 *
 * Allreduce among the top group (m bytes):
 * - recursive-doubling: fold p2p(m) + combine(m) before and p2p(m) after when rem > 0, and
 *   log2 n'·(exchange(m) + combine(m));
 * - rabenseifner: the same fold, Σ_{j=1..log2 n'} (exchange(m/2^j) + combine(m/2^j)) for the
 *   reduce-scatter and Σ_{j=1..log2 n'} exchange(m/2^j) for the allgather.
 *
 * Allgather (each member holds b bytes, every member ends with n·b; group-allgather.ts):
 * - ring: (n − 1)·exchange(b);
 * - recursive-doubling: Σ_{k=0..log2 n'−1} exchange(2^k·b·n/n') — an active member stands for
 *   n/n' members on average — plus, when rem > 0, p2p(b) first and p2p((n − 1)·b) last;
 * - bruck: Σ_{k=0..lg−1} exchange(min(2^k, n − 2^k)·b);
 * - neighbor-exchange (S2), even n: exchange(b) + (n/2 − 1)·exchange(2b); odd n: p2p(b), the even
 *   scheme over n − 1 members, and p2p((n − 1)·b) — (n + 3)/2 rounds;
 * - shm: n publications, each an S0 bcast of b bytes among n (given by the level).
 *
 * Gather (every member but the root holds b bytes of rank blocks, the root ends with all of them;
 * group-gather.ts), and scatter, its mirror:
 * - flat: gather p2p(b) + (n − 2)·max(g, o_r + b·G) — the blocks arrive together and the root
 *   takes them one member at a time; scatter (n − 2)·send(b) + p2p(b), as a flat bcast of b;
 * - binomial: on the tree, a member's message carrying its whole subtree's blocks
 *   (subtree·b bytes): gather as the tree reduce without combining (children smallest subtree
 *   first, each when it has arrived); scatter as the tree bcast in which child c receives
 *   subtree(c)·b — the scatter half of scatter-allgather.
 *
 * Reduce-scatter (every member holds the whole vector, n shares of b bytes — the blocks of the
 * ranks each member stands for, b = m/n of an m-byte vector; member i ends with share i reduced
 * over the group; group-reduce-scatter.ts), commutative operators only:
 * - ring: (n − 1)·(exchange(b) + combine(b)). In round t member i sends its partial share
 *   (i − t − 1) mod n to i + 1 while it receives share (i − t − 2) mod n from i − 1 (one
 *   SendRecvReduce of b bytes each way: exchange(b)), and combines it into its own (combine(b));
 *   the share it received is the one it sends in round t + 1, so every round waits for the
 *   previous round's combine: n − 1 dependent rounds, each exchange(b) + combine(b).
 * - recursive-halving (Thakur et al. 2005 §4.1), m = n·b: with rem > 0 first the fold, p2p(m) +
 *   combine(m), and last p2p(b) (the folded member's share back); then Σ_{j=1..log2 n'}
 *   (exchange(m/2^j) + combine(m/2^j)) — in round j a member sends the half of what it still
 *   holds that its partner keeps and combines the half it keeps. The same bytes as the ring
 *   (n = n'), in log2 n' rounds instead of n − 1.
 *
 * Scan and exscan (the hierarchical scan of scan.ts over the rank-ordered plan; every message is
 * the whole m-byte vector, unsegmented), per group of n:
 * - up: lg·(p2p(m) + combine(m)) for the inclusive scan by recursive doubling (in each round a
 *   member sends, then receives and combines on the left, before its next round's send; lg of
 *   n − 1 in the top group, whose last member stays out), p2p(m) for the shift to the next
 *   member, and p2p(m) for the group's total to its leader — except in the top group (its total
 *   goes nowhere);
 * - down, except in the top group (whose leader is rank 0, with an empty prefix): the leader
 *   sends the exclusive prefix to its other members one after another, as the flat bcast, and
 *   each combines it: (n − 2)·send(m) + p2p(m) + combine(m) (n = 2: p2p(m) + combine(m)).
 * The levels add up (each level's messages wait for the whole level below); scan also combines
 * its own input once at the end, combine(m), which exscan does not.
 *
 * Alltoall (alltoall.ts; b bytes per pair block, one block a message):
 * - pairwise among n members that each stand for themselves: (n − 1)·exchange(b);
 * - bruck (n members of one node): Σ_{k: 2^k < n} (exchange(m_k·b) + 2·m_k·b / combine rate),
 *   m_k the distances i in 1 … n−1 with bit k set — one packed message each way per round, its
 *   blocks copied in and out (at the combining rate, a bound on a copy's);
 * - hierarchical, one group's part (members covering c_i ranks, o ranks outside the group, u =
 *   Σ_{i ≠ leader} c_i·o blocks up and as many down, pair blocks c̄² = (Σc_i / n)² per member
 *   pair): up u·max(g, o_r + b·G) + p2p(b) into the leader; the cross exchange (n − 1)·exchange(b)
 *   when every member stands for itself inside a node, else (n − 1)·(c̄²·(send(b) + max(g, o_r +
 *   b·G)) + L) — each step's blocks out, then in, assuming the transports buffer a step's messages
 *   (with rendezvous sends a cycle's members follow each other); down u·send(b) + p2p(b). The
 *   call is the sum over the groups of the largest group's chain; a group of one member costs 0.
 *   With bundles (one message per list, an alltoall's): up p2p(B) + (n − 2)·max(g, o_r + B·G),
 *   B = u·b / (n − 1) the mean bundle, down (n − 2)·send(B) + p2p(B), the cross step
 *   send(c̄²·b) + max(g, o_r + c̄²·b·G) + L, and every bundled byte copied twice (packed, unpacked)
 *   at the combining rate.
 *
 * Barrier: S4's formulas (barrier-model.ts) on the link's L, o_s, o_r, g.
 *
 * n = 1: 0 for every algorithm. The formulas assume the group's members run concurrently; when a
 * node has more ranks than cores, the level's link parameters must be those measured that way
 * (selection.ts takes the `oversubscribed` set for such nodes), and a group whose members
 * outnumber their cores is also bounded by its work shared among them (core-sharing.ts).
 */

/** LogGP parameters of one kind of link, µs and µs per byte. */
export interface LinkModel {
  /** Latency of one small message. */
  L: number;
  /** Sender overhead of one message. */
  os: number;
  /** Receiver overhead of one message. */
  or: number;
  /** Gap: least time between two consecutive sends (or receives) of one rank. */
  g: number;
  /** Gap per byte of one message in one direction. */
  G: number;
  /** Per byte of a pairwise exchange (both directions at once). */
  Gx: number;
}

/** What a level's formulas are evaluated on. */
export interface LevelCosts {
  link: LinkModel;
  /** Bytes per µs that one rank applies a reduction operator at. */
  combineBytesPerUs: number;
  /** The S0 engine's bcast of `bytes` among `n` ranks, µs; undefined where the group is not inside one node. */
  shmBcastUs?: (bytes: number, n: number) => number;
  /** Cores of the node, for the S0 reduce's shared combining; undefined where the group spans nodes. */
  cores?: number;
}

export function p2pUs(link: LinkModel, bytes: number): number {
  return link.os + bytes * link.G + link.L + link.or;
}

export function sendUs(link: LinkModel, bytes: number): number {
  return Math.max(link.g, link.os + bytes * link.G);
}

export function exchangeUs(link: LinkModel, bytes: number): number {
  return link.os + link.L + link.or + bytes * link.Gx;
}

function combineUs(c: LevelCosts, bytes: number): number {
  return bytes / c.combineBytesPerUs;
}

/** ⌈log2 n⌉. */
export function ceilLog2(n: number): number {
  let k = 0;
  for (let d = 1; d < n; d *= 2) k++;
  return k;
}

/** 2^⌊log2 n⌋. */
function floorPow2(n: number): number {
  let p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/** Children of relative position v (root 0) in send order. */
function treeChildren(algorithm: 'binomial' | { knomial: number }, n: number, v: number): number[] {
  return algorithm === 'binomial' ? binomialTree(n, 0, v).children : knomialTree(n, algorithm.knomial, 0, v).children;
}

/** A tree bcast where child c receives `bytesTo(c)`: the last member's ready time. */
function treeBcastUs(link: LinkModel, children: (v: number) => number[], bytesTo: (c: number) => number): number {
  let latest = 0;
  const visit = (v: number, ready: number): void => {
    latest = Math.max(latest, ready);
    let t = ready;
    for (const c of children(v)) {
      const b = bytesTo(c);
      visit(c, t + p2pUs(link, b));
      t += sendUs(link, b);
    }
  };
  visit(0, 0);
  return latest;
}

/** A tree reduce of m bytes: when the root has combined its last child's data. */
function treeReduceUs(c: LevelCosts, children: (v: number) => number[], m: number): number {
  return treeGatherUs(c.link, children, () => m, combineUs(c, m));
}

/**
 * Data up a tree, child c sending `bytesFrom(c)` to its parent once its own children's have been
 * taken in (and combined, `combine` µs each): when the root has taken its last child's.
 */
function treeGatherUs(link: LinkModel, children: (v: number) => number[], bytesFrom: (c: number) => number, combine: number): number {
  const finish = (v: number): number => {
    let t = 0;
    // Smallest subtree first: the reverse of the bcast order. The first message costs o_r to
    // take in; each further one max(g, o_r + b·G), as in the flat reduce (a k-nomial tree of
    // radix ≥ n is the flat one, and predicts the same).
    const kids = children(v);
    for (let j = kids.length - 1; j >= 0; j--) {
      const b = bytesFrom(kids[j]!);
      const arrival = finish(kids[j]!) + link.os + b * link.G + link.L;
      const take = j === kids.length - 1 ? link.or : Math.max(link.g, link.or + b * link.G);
      t = Math.max(t, arrival) + take + combine;
    }
    return t;
  };
  return finish(0);
}

export function predictGroupBcastUs(algorithm: BcastAlgorithm, n: number, m: number, c: LevelCosts): number {
  checkGroup(n, m);
  if (n === 1) return 0;
  const { link } = c;
  if (algorithm === 'flat') return (n - 2) * sendUs(link, m) + p2pUs(link, m);
  if (algorithm === 'binomial' || (typeof algorithm === 'object' && 'knomial' in algorithm)) {
    return treeBcastUs(
      link,
      (v) => treeChildren(algorithm, n, v),
      () => m,
    );
  }
  if (algorithm === 'scatter-allgather') {
    const block = m / n;
    const scatter = treeBcastUs(
      link,
      (v) => binomialTree(n, 0, v).children,
      (child) => binomialSubtreeSize(n, 0, child) * block,
    );
    return scatter + (n - 1) * exchangeUs(link, block);
  }
  if (algorithm === 'shm') return requireShm(c, 'bcast')(m, n);
  return unknown('bcast', algorithm);
}

/**
 * S1's own LogP/LogGP estimate of its one-sided binomial bcast (../shared/design/seeds.md, "S1 —
 * Binomial-tree broadcast in the one-sided (RMA) model", the LogP estimate line) over p ranks:
 *   t = (o + 2q + L + o_r)·⌈log2 p⌉ + o_s + L + (m − 1)·G·⌈log2 p⌉,
 * o = o_s, q = max(o, g), o_r the polling cost (the link's receive overhead), m bytes (m − 1
 * taken as at least 0); LogGP's (m − 1)·G is paid once per stage. p = 1: 0. Not one of the
 * candidates `auto` chooses among: bench/overlap.mjs prints it beside the measured one-sided bcast.
 */
export function oneSidedBcastUs(link: LinkModel, p: number, bytes: number): number {
  checkGroup(p, bytes);
  if (p === 1) return 0;
  const stages = ceilLog2(p);
  const o = link.os;
  const q = Math.max(o, link.g);
  return (o + 2 * q + link.L + link.or) * stages + link.os + link.L + Math.max(0, bytes - 1) * link.G * stages;
}

export function predictGroupReduceUs(algorithm: ReduceAlgorithm, n: number, m: number, c: LevelCosts): number {
  checkGroup(n, m);
  if (n === 1) return 0;
  const { link } = c;
  if (algorithm === 'flat') return p2pUs(link, m) + combineUs(c, m) + (n - 2) * (Math.max(link.g, link.or + m * link.G) + combineUs(c, m));
  if (algorithm === 'binomial' || (typeof algorithm === 'object' && 'knomial' in algorithm)) {
    return treeReduceUs(c, (v) => treeChildren(algorithm, n, v), m);
  }
  if (algorithm === 'rabenseifner') {
    const active = floorPow2(n);
    let t = n > active ? p2pUs(link, m) + combineUs(c, m) : 0;
    for (let part = 2; part <= active; part *= 2) t += exchangeUs(link, m / part) + combineUs(c, m / part);
    for (let held = 1; held < active; held *= 2) t += p2pUs(link, (m * held) / active);
    return t;
  }
  if (algorithm === 'shm') {
    // Every member copies its data into its queue once, then each core combines a slice of the
    // message out of every member's queue; a notification round up and one down.
    const bcast = requireShm(c, 'reduce');
    const cores = Math.max(1, Math.min(n, c.cores ?? 1));
    return 2 * bcast(0, n) + bcast(m, 2) + ((n - 1) * m) / cores / c.combineBytesPerUs;
  }
  return unknown('reduce', algorithm);
}

export function predictGroupAllreduceUs(algorithm: AllreduceAlgorithm, n: number, m: number, c: LevelCosts): number {
  checkGroup(n, m);
  if (n === 1) return 0;
  const { link } = c;
  const active = floorPow2(n);
  let t = n > active ? 2 * p2pUs(link, m) + combineUs(c, m) : 0;
  if (algorithm === 'recursive-doubling') {
    for (let d = 1; d < active; d *= 2) t += exchangeUs(link, m) + combineUs(c, m);
    return t;
  }
  if (algorithm === 'rabenseifner') {
    for (let part = 2; part <= active; part *= 2) t += 2 * exchangeUs(link, m / part) + combineUs(c, m / part);
    return t;
  }
  return unknown('allreduce', algorithm);
}

/** An allgather in which every member holds `b` bytes and ends with all n·b. */
export function predictGroupAllgatherUs(algorithm: GroupAllgatherAlgorithm, n: number, b: number, c: LevelCosts): number {
  checkGroup(n, b);
  if (n === 1) return 0;
  const { link } = c;
  switch (algorithm) {
    case 'ring':
      return (n - 1) * exchangeUs(link, b);
    case 'recursive-doubling': {
      const active = floorPow2(n);
      let t = n > active ? p2pUs(link, b) + p2pUs(link, (n - 1) * b) : 0;
      for (let k = 1; k < active; k *= 2) t += exchangeUs(link, (k * b * n) / active);
      return t;
    }
    case 'bruck': {
      let t = 0;
      for (let k = 1; k < n; k *= 2) t += exchangeUs(link, Math.min(k, n - k) * b);
      return t;
    }
    case 'neighbor-exchange': {
      const even = (members: number, block: number): number => exchangeUs(link, block) + (members / 2 - 1) * exchangeUs(link, 2 * block);
      if (n % 2 === 0) return even(n, b);
      if (n === 1) return 0;
      return p2pUs(link, b) + (n > 2 ? even(n - 1, b) : 0) + p2pUs(link, (n - 1) * b);
    }
    case 'shm':
      return n * requireShm(c, 'allgather')(b, n);
    default:
      return unknown('allgather', algorithm);
  }
}

/** A gather to one member in which every other member holds `b` bytes of rank blocks. */
export function predictGroupGatherUs(algorithm: GroupGatherAlgorithm, n: number, b: number, c: LevelCosts): number {
  checkGroup(n, b);
  if (n === 1) return 0;
  const { link } = c;
  if (algorithm === 'flat') return p2pUs(link, b) + (n - 2) * Math.max(link.g, link.or + b * link.G);
  if (algorithm === 'binomial') {
    return treeGatherUs(
      link,
      (v) => binomialTree(n, 0, v).children,
      (child) => binomialSubtreeSize(n, 0, child) * b,
      0,
    );
  }
  return unknown('gather', algorithm);
}

/** A scatter from one member that hands every other member `b` bytes of rank blocks. */
export function predictGroupScatterUs(algorithm: GroupGatherAlgorithm, n: number, b: number, c: LevelCosts): number {
  checkGroup(n, b);
  if (n === 1) return 0;
  const { link } = c;
  if (algorithm === 'flat') return (n - 2) * sendUs(link, b) + p2pUs(link, b);
  if (algorithm === 'binomial') {
    return treeBcastUs(
      link,
      (v) => binomialTree(n, 0, v).children,
      (child) => binomialSubtreeSize(n, 0, child) * b,
    );
  }
  return unknown('scatter', algorithm);
}

/**
 * A reduce-scatter among n members, each of which ends with its share of `b` bytes (the blocks of
 * the ranks it stands for) reduced over the group.
 */
export function predictGroupReduceScatterUs(algorithm: GroupReduceScatterAlgorithm, n: number, b: number, c: LevelCosts): number {
  checkGroup(n, b);
  if (n === 1) return 0;
  const { link } = c;
  if (algorithm === 'ring') return (n - 1) * (exchangeUs(link, b) + combineUs(c, b));
  if (algorithm === 'recursive-halving') {
    const m = n * b;
    const active = floorPow2(n);
    let t = n > active ? p2pUs(link, m) + combineUs(c, m) + p2pUs(link, b) : 0;
    for (let part = 2; part <= active; part *= 2) t += exchangeUs(link, m / part) + combineUs(c, m / part);
    return t;
  }
  return unknown('reduce-scatter', algorithm);
}

/**
 * One group's part of a scan (or exscan) of `m` bytes among n members (scan.ts): the recursive
 * doubling, the shift and, unless `top`, the total up to the leader and the exclusive prefix
 * down from it.
 */
export function predictGroupScanUs(n: number, m: number, c: LevelCosts, top: boolean): number {
  checkGroup(n, m);
  if (n === 1) return 0;
  const { link } = c;
  // The top group's last member stays out of the doubling (scan.ts): its rounds are those of n − 1.
  const up = ceilLog2(top ? n - 1 : n) * (p2pUs(link, m) + combineUs(c, m)) + p2pUs(link, m);
  if (top) return up;
  const down = (n - 2) * sendUs(link, m) + p2pUs(link, m) + combineUs(c, m);
  return up + p2pUs(link, m) + down;
}

/** The last combine of an inclusive scan (its prefix with its own input); an exscan has none. */
export function scanFinishUs(exclusive: boolean, m: number, c: LevelCosts): number {
  return exclusive ? 0 : combineUs(c, m);
}

export function predictGroupBarrierUs(algorithm: GroupBarrierAlgorithm, n: number, c: LevelCosts): number {
  return predictBarrierUs(algorithm, n, c.link);
}

/**
 * Two stages of a pipeline that one group runs over the same links in opposite directions (an
 * allreduce's reduce and bcast at one level): in steady state the reduce of segment k + 1 and the
 * bcast of segment k cross the same pairs at once. `shared` is the link's Gx / 2G, clamped to
 * [1/2, 1]: 1/2 on a full-duplex link that another agent drives (the two overlap, the slower one
 * sets the pace), 1 where the ranks' own cores copy both directions (they take turns).
 */
export interface StagePair {
  first: number;
  second: number;
  shared: number;
}

/** A pair's Gx / 2G on `link`, in [1/2, 1] (StagePair.shared). */
export function duplexShare(link: LinkModel): number {
  if (!(link.G > 0)) return 0.5;
  return Math.min(1, Math.max(0.5, link.Gx / (2 * link.G)));
}

/**
 * A pipeline of stages (levels, or phases of levels) over `segments` segments: the first segment
 * passes every stage, each further one leaves the slowest stage one stage-time after the one
 * before it. `stageUs` are one segment's times. A pair of stages on the same links (`pairs`)
 * paces as one stage of max(first, second, (first + second)·shared).
 */
export function pipelineUs(stageUs: readonly number[], segments: number, pairs: readonly StagePair[] = []): number {
  let sum = 0;
  let max = 0;
  const paired = new Set<number>();
  for (const { first, second, shared } of pairs) {
    const a = stageUs[first]!;
    const b = stageUs[second]!;
    max = Math.max(max, a, b, (a + b) * shared);
    paired.add(first).add(second);
  }
  stageUs.forEach((t, i) => {
    sum += t;
    if (!paired.has(i)) max = Math.max(max, t);
  });
  return sum + Math.max(0, segments - 1) * max;
}

function requireShm(c: LevelCosts, collective: string): (bytes: number, n: number) => number {
  if (c.shmBcastUs === undefined) throw new TopocollError('EINVAL', `cost model: ${collective} shm needs a group inside one node`);
  return c.shmBcastUs;
}

function checkGroup(n: number, bytes: number): void {
  if (!Number.isInteger(n) || n < 1) throw new TopocollError('EINVAL', `cost model: group size ${n} is not a positive integer`);
  if (!(bytes >= 0) || !Number.isFinite(bytes)) throw new TopocollError('EINVAL', `cost model: ${bytes} bytes is not a finite size ≥ 0`);
}

function unknown(collective: string, algorithm: unknown): never {
  throw new TopocollError('EINVAL', `cost model: no formula for ${collective} algorithm ${JSON.stringify(algorithm)}`);
}

/** A pairwise alltoall among `n` members, `b` bytes per block (alltoall.ts, `pairwise`). */
export function predictPairwiseAlltoallUs(n: number, b: number, c: LevelCosts): number {
  checkGroup(n, b);
  return n <= 1 ? 0 : (n - 1) * exchangeUs(c.link, b);
}

/** Bruck's alltoall among `n` members of one node, `b` bytes per block (alltoall.ts, `bruck`). */
export function predictBruckAlltoallUs(n: number, b: number, c: LevelCosts): number {
  checkGroup(n, b);
  let us = 0;
  for (let bit = 1; bit < n; bit *= 2) {
    let m = 0;
    for (let i = 1; i < n; i++) if ((i & bit) !== 0) m++;
    us += exchangeUs(c.link, m * b) + (2 * m * b) / c.combineBytesPerUs;
  }
  return us;
}

/**
 * One group's part of a hierarchical alltoall (alltoall.ts, `hierarchical`): its members cover
 * `covers` ranks each (the leader first), `outside` ranks lie outside it, `b` bytes per block;
 * `exchanges`: every member stands for itself inside one node (the cross steps are SendRecvs).
 */
export function predictAlltoallGroupUs(covers: readonly number[], outside: number, b: number, c: LevelCosts, exchanges: boolean, bundles = false): number {
  const n = covers.length;
  checkGroup(n, b);
  if (n === 1) return 0;
  const { link } = c;
  const up = covers.slice(1).reduce((t, x) => t + x * outside, 0);
  const mean = covers.reduce((t, x) => t + x, 0) / n;
  const take = (bytes: number): number => Math.max(link.g, link.or + bytes * link.G);
  const copy = (bytes: number): number => (2 * bytes) / c.combineBytesPerUs;
  if (bundles) {
    const bundle = (up * b) / (n - 1);
    const moves = up === 0 ? 0 : 2 * p2pUs(link, bundle) + (n - 2) * (take(bundle) + sendUs(link, bundle)) + 2 * copy(up * b);
    const pair = mean * mean * b;
    const cross = exchanges ? (n - 1) * exchangeUs(link, b) : (n - 1) * (sendUs(link, pair) + take(pair) + link.L + copy(pair));
    return moves + cross;
  }
  const moves = up === 0 ? 0 : 2 * p2pUs(link, b) + up * take(b) + up * sendUs(link, b);
  const cross = exchanges ? (n - 1) * exchangeUs(link, b) : (n - 1) * (mean * mean * (sendUs(link, b) + take(b)) + link.L);
  return moves + cross;
}
