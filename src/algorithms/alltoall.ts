import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import { coveredBelow, topGroup } from './hierarchical.js';
import { pairBlock, StepKind, type BlockRange, type Schedule, type Step } from './schedule.js';

/**
 * Alltoall and alltoallv schedules, on pair blocks (schedule.ts, "Pair blocks"): block (s, d) is
 * what rank s sends rank d; every rank s starts with its row (s, ·) in its send buffer and ends
 * with its column (·, s) in its recv buffer. Block (s, s) moves nowhere (the executor copies it).
 * A message carries one block and its length, so alltoallv needs no count exchange: a rank that
 * only passes a block on learns its length from the message; the block's destination checks it
 * against its own count (EMISMATCH if they differ). Only an alltoall, whose blocks all have the
 * call's length n, packs several blocks into one message (Bruck's rounds, bundles below).
 *
 * **Pairwise** (`pairwise`): for a group whose members are all linked (a one-node job: every
 * two ranks of a node get a channel). Step k = 1 … p−1: rank r sends block (r, r+k) to r+k and
 * receives block (r−k, r) from r−k (mod p), one exchange (SendRecv: inside a node the two
 * interleave piece by piece, so no ring must hold a block). p−1 rounds, each block sent once,
 * straight to its destination.
 *
 * **Bruck** (`bruck`; an alltoall's small blocks on one node, not alltoallv's): ⌈log2 p⌉ rounds
 * instead of p − 1. Seen from rank r, block (s, s + i) is "at distance i"; round k (bit = 2^k)
 * moves every block whose distance has bit k set from r to r + bit, so block (s, s + i) reaches
 * s + i after the rounds of i's bits, and before round k it lies at s + (i mod bit). So in round
 * k rank r sends r + bit the blocks (r − (i mod bit), · + i) and receives from r − bit the blocks
 * (r − bit − (i mod bit), · + i), for every i in 1 … p−1 with bit k set, ascending: one run of
 * joined SendRecvs, one packed message each way (schedule.ts, "Pair blocks"). The classic
 * algorithm's local rotation is the pair-block addressing itself: the executor finds each block
 * where it is (send, a staged copy, or its place in recv), packs and unpacks it. Every block
 * moves popcount(i) times, so it pays ⌈log2 p⌉/2 times the bytes: for small blocks only (the
 * cost model decides, cost-model.ts).
 *
 * **Hierarchical** (`hierarchical`; several nodes): blocks travel along the plan's groups,
 * whose members only are linked (channels inside a node, TCP between the node leaders at the
 * world and switch levels). A member m of a group G covers cov(m, G) (hierarchical.ts,
 * coveredBelow: m and what it leads below G); all(G) is the union over G's members. Block (s, d)
 * crosses, in the lowest group G covering both s and d, from the member covering s to the member
 * covering d; below that group it goes up each group to its leader (from s towards the member
 * covering it) and down again from the leader towards d. For a node-and-world plan this is the
 * node-aggregated form: every rank hands its blocks for other nodes to its node leader, the
 * leaders exchange each other node's blocks pairwise, and each leader hands its ranks what came
 * for them. A rank x runs, for each group G of its chain bottom-up:
 * 1. **up**: the leader receives, member by member, the blocks (s, d) with s ∈ cov(m, G) and
 *    d ∉ all(G); a non-leader (G is the top of its chain) sends its own such blocks to it;
 * 2. **cross**: the group's pairwise exchange, step k = 1 … n−1 (n members, positions i):
 *    position i sends position i+k the blocks (s, d), s ∈ cov(i), d ∈ cov(i+k), and receives
 *    from i−k the blocks s ∈ cov(i−k), d ∈ cov(i) — one SendRecv when the group lies in one
 *    node and every member covers only itself (the bottom groups), else Sends and Recvs ordered
 *    so that blocking sends cannot deadlock: step k splits the positions into g = gcd(n, k) cycles
 *    i → i+k; the cycle's head (position < g) receives first, then sends; everyone else sends
 *    first. The sends run down each cycle from its last member to its head (TCP sends block once
 *    the socket buffers are full: no segment limit is needed, as the exchanges of other
 *    collectives need it);
 * then for each group of its chain top-down:
 * 3. **down**: a non-leader receives from the leader the blocks (s, d), s ∉ all(G), d ∈ cov(x, G);
 *    the leader sends each member m, in member order, the blocks s ∉ all(G), d ∈ cov(m, G).
 * Every block list runs s-major, both indices ascending, so the k-th message on a link meets the
 * k-th receive; two ranks share at most one group, and each side lists that group's messages in
 * the same order (up, cross, then down). Deadlock freedom with blocking sends: up and down follow
 * the coverage tree as gather and scatter do (a leader waits on its members in order, a member on
 * its leader, which waits only on groups above or below that cover other ranks); a cross
 * exchange starts once every member finished its ups, which wait on nobody; within a step a
 * blocked rank waits on a rank of its own cycle (a receiver in a later step has taken every
 * earlier message on that link, a sender in a later step has sent it). The simulator checks it
 * with rendezvous sends (test/algorithms/alltoall.test.ts).
 *
 * **Cross exchanges** (`exchanges`): ordered Sends and Recvs put a step's messages on the wire one
 * direction after the other — between two nodes one latency and one transfer each way in turn.
 * Where the group's links exchange in both directions at once (TCP between nodes writes while it
 * reads; a host layer and MPI hold messages up to a limit: the planner's exchange limit for the
 * group, ExchangeLimits, covers the step's largest message), a step whose sends and receives are
 * as many (the members cover as many ranks) is their SendRecvs in list order instead: the j-th
 * send with the j-th receive. A rank in such an exchange reads while it writes, so it never
 * blocks a sender; mixed with ordered steps of members that cover other counts, the argument
 * above holds with fewer waits.
 *
 * **Bundles** (`packed`, an alltoall's small blocks; not alltoallv's, whose lengths only the
 * blocks' ends know): every list above that one rank sends one peer in one go — a member's blocks
 * up, a leader's blocks down to one member, one cross step's blocks each way — is one message (a
 * run of joined Sends or Recvs, schedule.ts "Pair blocks"): a pair of node leaders exchanges one
 * node-sized bundle a step, as UCC's cl/hier does. The order of sends and receives is the same,
 * so is the argument above (a bundle blocks as its first block would).
 *
 * Messages: the pairwise form sends p−1 per rank, Bruck ⌈log2 p⌉; the hierarchical form sends,
 * from a node of L ranks among N nodes, L·(p−L) blocks up and the same down inside the node and
 * L·(p−L) block messages between leaders, back to back on one link per pair of nodes — or, with
 * bundles, one message a member up and down and one per pair of leaders each way.
 */
export type AlltoallAlgorithm = 'pairwise' | 'bruck' | 'hierarchical';

/** The algorithm by placement: one node (or one rank) pairwise (or bruck, as the cost model says), several nodes hierarchical. */
export function alltoallAlgorithm(plan: GroupPlan): 'pairwise' | 'hierarchical' {
  const node = plan.placements[0]?.node;
  return plan.placements.every((p) => p.node === node) ? 'pairwise' : 'hierarchical';
}

/**
 * `packed`: the hierarchical form's bundles as one message each (an alltoall's, not alltoallv's:
 * see "Bundles"). `exchanges`: the groups (across nodes) whose cross steps may be exchanges —
 * where their links write while they read, or hold the messages (see "Cross exchanges").
 */
export interface AlltoallOptions {
  packed?: boolean;
  exchanges?: (g: Group) => boolean;
}

/** The steps of `rank` in an alltoall (one phase of pair blocks, root 0). */
export function alltoallSchedule(
  plan: GroupPlan,
  rank: number,
  algorithm: AlltoallAlgorithm = alltoallAlgorithm(plan),
  options: AlltoallOptions = {},
): Schedule {
  plan.chain(rank); // validates rank
  const steps =
    algorithm === 'pairwise'
      ? pairwiseSteps(plan, rank)
      : algorithm === 'bruck'
        ? bruckSteps(plan, rank)
        : algorithm === 'hierarchical'
          ? hierarchicalSteps(plan, rank, options.packed === true, options.exchanges)
          : badAlgorithm(algorithm);
  return { collective: 'alltoall', root: 0, steps };
}

function pairwiseSteps(plan: GroupPlan, rank: number): Step[] {
  const p = plan.size;
  const top = topGroup(plan);
  const level = top === undefined ? 0 : Math.max(0, plan.levels.indexOf(top.level));
  const steps: Step[] = [];
  for (let k = 1; k < p; k++) {
    const to = (rank + k) % p;
    const from = (rank - k + p) % p;
    steps.push(exchange(to, pairBlock(rank, to, p), from, pairBlock(from, rank, p), level));
  }
  return steps;
}

function bruckSteps(plan: GroupPlan, rank: number): Step[] {
  const p = plan.size;
  const top = topGroup(plan);
  const level = top === undefined ? 0 : Math.max(0, plan.levels.indexOf(top.level));
  const at = (r: number): number => ((r % p) + p) % p;
  const steps: Step[] = [];
  for (let bit = 1; bit < p; bit *= 2) {
    const to = at(rank + bit);
    const from = at(rank - bit);
    const run: Step[] = [];
    for (let i = 1; i < p; i++) {
      if ((i & bit) === 0) continue;
      const s = at(rank - (i % bit));
      const t = at(from - (i % bit));
      run.push(exchange(to, pairBlock(s, at(s + i), p), from, pairBlock(t, at(t + i), p), level));
    }
    run.forEach((step, k) => {
      if (k < run.length - 1) step.joined = true;
    });
    steps.push(...run);
  }
  return steps;
}

function hierarchicalSteps(plan: GroupPlan, rank: number, packed: boolean, exchanges?: (g: Group) => boolean): Step[] {
  const p = plan.size;
  const chain = plan.chain(rank);
  const steps: Step[] = [];
  // A bundle: the blocks one step list sends one peer (or receives from it), one message when packed.
  const bundle = (run: Step[]): void => {
    if (packed) run.forEach((step, k) => k < run.length - 1 && (step.joined = true));
    steps.push(...run);
  };
  const shape = (g: Group): GroupShape => {
    const cov = g.members.map((m) => coveredBelow(plan, m, g));
    const inside = new Uint8Array(p);
    for (const c of cov) for (const r of c) inside[r] = 1;
    const outside: number[] = [];
    for (let r = 0; r < p; r++) if (inside[r] === 0) outside.push(r);
    const node = plan.placements[g.members[0]!]!.node;
    const local = g.members.every((m) => plan.placements[m]!.node === node);
    return {
      cov,
      outside,
      level: Math.max(0, plan.levels.indexOf(g.level)),
      exchanges: local && cov.every((c) => c.length === 1),
      pairs: !local && exchanges !== undefined && exchanges(g),
    };
  };
  const shapes = chain.map(shape);
  chain.forEach((g, gi) => {
    const { cov, outside, level } = shapes[gi]!;
    const me = g.members.indexOf(rank);
    const leads = g.leader === rank;
    // 1. up
    if (leads) {
      g.members.forEach((m, i) => {
        if (m !== rank) bundle(cov[i]!.flatMap((s) => outside.map((d) => move(StepKind.Recv, m, pairBlock(s, d, p), level))));
      });
    } else {
      bundle(cov[me]!.flatMap((s) => outside.map((d) => move(StepKind.Send, g.leader, pairBlock(s, d, p), level))));
    }
    // 2. cross
    for (const run of crossSteps(g, shapes[gi]!, me, p)) bundle(run);
  });
  for (let gi = chain.length - 1; gi >= 0; gi--) {
    const g = chain[gi]!;
    const { cov, outside, level } = shapes[gi]!;
    const me = g.members.indexOf(rank);
    // 3. down
    if (g.leader !== rank) {
      bundle(outside.flatMap((s) => cov[me]!.map((d) => move(StepKind.Recv, g.leader, pairBlock(s, d, p), level))));
    } else {
      g.members.forEach((m, i) => {
        if (m !== rank) bundle(outside.flatMap((s) => cov[i]!.map((d) => move(StepKind.Send, m, pairBlock(s, d, p), level))));
      });
    }
  }
  return steps;
}

interface GroupShape {
  /** What each member (by position) covers below the group. */
  cov: number[][];
  /** The ranks the group does not cover, ascending. */
  outside: number[];
  level: number;
  /** All members on one node, each covering only itself: every cross step is one SendRecv. */
  exchanges: boolean;
  /** Across nodes, cross steps may pair their sends and receives into SendRecvs (Cross exchanges). */
  pairs: boolean;
}

/** The cross exchange of position `me` in `g` (see 2. above), as runs: each a single exchange, or one peer's sends or receives (a bundle). */
function crossSteps(g: Group, shape: GroupShape, me: number, p: number): Step[][] {
  const n = g.members.length;
  const { cov, level } = shape;
  const steps: Step[][] = [];
  for (let k = 1; k < n; k++) {
    const to = (me + k) % n;
    const from = (me - k + n) % n;
    const sends: BlockRange[] = [];
    for (const s of cov[me]!) for (const d of cov[to]!) sends.push(pairBlock(s, d, p));
    const recvs: BlockRange[] = [];
    for (const s of cov[from]!) for (const d of cov[me]!) recvs.push(pairBlock(s, d, p));
    const toRank = g.members[to]!;
    const fromRank = g.members[from]!;
    if (shape.exchanges) {
      steps.push([exchange(toRank, sends[0]!, fromRank, recvs[0]!, level)]);
      continue;
    }
    if (shape.pairs && sends.length === recvs.length) {
      steps.push(sends.map((r, j) => exchange(toRank, r, fromRank, recvs[j]!, level)));
      continue;
    }
    const sent = sends.map((r) => move(StepKind.Send, toRank, r, level));
    const received = recvs.map((r) => move(StepKind.Recv, fromRank, r, level));
    const head = me < gcd(n, k);
    steps.push(...(head ? [received, sent] : [sent, received]));
  }
  return steps;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

function move(kind: StepKind, peer: number, range: BlockRange, level: number): Step {
  return { kind, peer, level, range };
}

function exchange(to: number, out: BlockRange, from: number, into: BlockRange, level: number): Step {
  return { kind: StepKind.SendRecv, peer: to, level, range: out, peer2: from, range2: { first: into.first, count: 1 } };
}

function badAlgorithm(a: never): never {
  throw new TopocollError('ECONFIG', `"${String(a)}" is not an alltoall algorithm`, { hint: 'Use pairwise, bruck or hierarchical.' });
}
