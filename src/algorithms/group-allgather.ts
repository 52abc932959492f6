import { TopocollError } from '../errors.js';
import type { GroupAllgatherAlgorithm } from './algorithm-choice.js';
import { checkPosition, GroupStepWriter, positionView, requireShmGroup, type GroupView } from './group-steps.js';
import { log2, powerOfTwoFold } from './power-of-two.js';
import { rankBlock, StepKind, type Step } from './schedule.js';

export type { GroupAllgatherAlgorithm } from './algorithm-choice.js';

/**
 * Allgather among one group, on rank blocks (schedule.ts, "Rank blocks"): position i starts with
 * the blocks of the global ranks `holds(i)` (at the bottom of a hierarchy just its own rank;
 * higher up, a leader holds everything it covers; possibly none); afterwards every member holds
 * the union of all holds. Every step moves exactly one rank block, so a block lands at its own
 * place in B (block r is rank r's contribution) and no algorithm rotates anything at the end.
 *
 * **Rounds.** Each algorithm is a sequence of rounds. In a round a position sends a set of blocks
 * to one position and receives a set from one position (either may be empty or absent); both
 * lists are in ascending rank, and the k-th block out is paired with the k-th block in as one
 * SendRecv while both remain, the rest being plain Sends (or plain Recvs). Sender and receiver
 * derive the same lists from `holds` alone, so the k-th message between two positions in a round
 * always meets the k-th receive. Deadlock freedom with eager SendRecv sends and rendezvous plain
 * Sends: a receive with index k in a round only waits for its sender to reach its send k, which
 * needs nothing but receives of earlier rounds or of smaller index.
 *
 * A position's **set of positions** stands for the ascending union of their holds.
 *
 * - `ring`: n − 1 rounds; in round t position i sends {i − t} to i + 1 and receives {i − t − 1}
 *   from i − 1 (mod n): what it received in the previous round, its own holds first.
 * - `recursive-doubling`: n a power of two: log2 n rounds; in round k, i exchanges with i XOR 2^k
 *   everything it holds, the aligned run of 2^k positions containing i. Any other n (n' =
 *   2^⌊log2 n⌋, rem = n − n'; the fold of power-of-two.ts): the first 2·rem positions pair up as
 *   (2j, 2j+1); first the odd one sends its holds to the even one (the only thing it does until
 *   the end); the n' active positions — even pair members and positions ≥ 2·rem, active index
 *   j ↔ pair j, position p ≥ 2·rem ↔ p − rem — run recursive doubling on active indices, each
 *   standing for its one or two positions; finally every even pair member sends its partner
 *   every block the partner did not hold. log2 n' + 2 rounds.
 * - `bruck`: ⌈log2 n⌉ rounds; in round k position i sends {i, i + 1, …, i + c − 1} to i − 2^k
 *   and receives {i + 2^k, …, i + 2^k + c − 1} from i + 2^k (mod n), c = min(2^k, n − 2^k): the
 *   last round sends only what is still missing at the receiver. Before round k, i holds
 *   {i, …, i + 2^k − 1}.
 * - `neighbor-exchange` (S2), n even: n/2 rounds over the pairs P = {2j, 2j+1}. Round 0: i
 *   exchanges {i} with i XOR 1 (even i with its right neighbour). Round t ≥ 1: even i exchanges
 *   with its left neighbour i − 1 when t is odd and with its right neighbour i + 1 when t is even
 *   (odd i: right when odd, left when even; mod n); it sends its own pair at t = 1 and from then
 *   on the pair it received in round t − 1, and receives pair P − (t+1)/2 (t odd) or P + t/2
 *   (t even) for even i in pair P, P + (t+1)/2 or P − t/2 for odd i (mod n/2). Each round adds
 *   one pair, every message is the two blocks-sets of one pair.
 *   n odd (S2's scheme, (n + 3)/2 rounds): position n − 1 sends its holds to n − 2 and drops
 *   out; positions 0 … n − 2 run the even scheme, n − 2 standing for {n − 2, n − 1} (so it
 *   passes on n − 1's blocks together with its own); finally n − 2 sends n − 1 every block it
 *   did not hold.
 * - `shm` (issue 15), a group inside one node registered with the shared-memory engine (S0;
 *   `options.shmGroup`, else ECONFIG as for a shm bcast): no tree and no messages — every member
 *   copies each of its blocks into its own S0 queue once and reads the others' blocks directly
 *   out of theirs. One round per position i, ascending: for each rank r of holds(i), ascending,
 *   one ShmBcast step {peer: members[i], group: id, range: rankBlock(r)}; every member runs the
 *   same list (position i publishes its blocks, the others copy them). The executor tags the
 *   fragments per (segment, block), so a position publishes several blocks in a row. Deadlock
 *   free: position i waits only on the publications of positions below i (it reads them before
 *   its own), and a publication waits only on readers, who reach it after reading from lower
 *   positions only — by induction from position 0, which waits for nobody.
 * - n = 1: no steps (`shm` still needs the group's id).
 *
 * Every step's `level` is `view.level`; peers are global ranks (`view.members`).
 */
export interface GroupAllgatherOptions {
  /** `shm`: the id under which the rank registered this group with the shared-memory engine. */
  shmGroup?: number;
}

export function groupAllgatherSteps(
  algorithm: GroupAllgatherAlgorithm,
  view: GroupView,
  me: number,
  holds: (position: number) => readonly number[],
  options: GroupAllgatherOptions = {},
): Step[] {
  return groupAllgatherRounds(algorithm, view, me, holds, options).flat();
}

/**
 * The steps of `groupAllgatherSteps`, round by round (a round without steps for `me` is an
 * empty list; the lists of one member are not padded to the same length as another's). The
 * round structure is what `averageLogicalDistance` counts messages by.
 */
export function groupAllgatherRounds(
  algorithm: GroupAllgatherAlgorithm,
  view: GroupView,
  me: number,
  holds: (position: number) => readonly number[],
  options: GroupAllgatherOptions = {},
): Step[][] {
  const n = view.members.length;
  checkPosition(n, me, 'own');
  const held = checkedHolds(view, holds);
  const rounds = new Rounds(view, held);
  if (algorithm === 'shm') {
    const group = requireShmGroup(view, options.shmGroup);
    if (n > 1) rounds.publications(group);
    return rounds.list;
  }
  if (n === 1) {
    if (!ALGORITHMS.has(algorithm)) badAlgorithm(algorithm);
    return rounds.list;
  }
  switch (algorithm) {
    case 'ring':
      ring(rounds, n, me);
      break;
    case 'recursive-doubling':
      recursiveDoubling(rounds, n, me);
      break;
    case 'bruck':
      bruck(rounds, n, me);
      break;
    case 'neighbor-exchange':
      neighborExchange(rounds, n, me);
      break;
    default:
      badAlgorithm(algorithm);
  }
  return rounds.list;
}

const ALGORITHMS: ReadonlySet<string> = new Set<GroupAllgatherAlgorithm>(['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange', 'shm']);

/** Writes rounds: one round = blocks out to one position, blocks in from one position. */
class Rounds {
  readonly list: Step[][] = [];

  constructor(
    private readonly view: GroupView,
    private readonly held: readonly (readonly number[])[],
  ) {}

  /**
   * One round: the blocks of positions `out` to position `to`, those of positions `in` from
   * `from` (−1: none); pairs while both lists last, then the rest alone.
   */
  round(to: number, out: readonly number[], from: number, into: readonly number[]): void {
    const sent = to < 0 ? [] : this.blocksOf(out);
    const received = from < 0 ? [] : this.blocksOf(into);
    const w = new GroupStepWriter(this.view);
    const pairs = Math.min(sent.length, received.length);
    for (let k = 0; k < pairs; k++) w.sendRecv(to, rankBlock(sent[k]!), from, { first: received[k]!, count: 1 });
    for (let k = pairs; k < sent.length; k++) w.send(to, rankBlock(sent[k]!));
    for (let k = pairs; k < received.length; k++) w.recv(from, rankBlock(received[k]!));
    this.list.push(w.steps);
  }

  /** One round per position, ascending: a ShmBcast of each of its blocks from it, in group `group`. */
  publications(group: number): void {
    this.view.members.forEach((source, i) => {
      this.list.push(this.blocksOf([i]).map((r) => ({ kind: StepKind.ShmBcast, peer: source, level: this.view.level, group, range: rankBlock(r) })));
    });
  }

  /** The ascending union of the holds of `positions`, less those of `except`. */
  blocksOf(positions: readonly number[], except: readonly number[] = []): number[] {
    const skip = new Set(except.flatMap((p) => this.held[p]!));
    return positions
      .flatMap((p) => this.held[p]!)
      .filter((r) => !skip.has(r))
      .sort((a, b) => a - b);
  }

  /** A round that sends the blocks of `positions` less those `to` holds itself (−1: none). */
  sendAllBut(to: number, positions: readonly number[]): void {
    const w = new GroupStepWriter(this.view);
    for (const r of this.blocksOf(positions, [to])) w.send(to, rankBlock(r));
    this.list.push(w.steps);
  }

  /** The mirror of `sendAllBut` at the receiver `me`. */
  recvAllBut(from: number, positions: readonly number[], me: number): void {
    const w = new GroupStepWriter(this.view);
    for (const r of this.blocksOf(positions, [me])) w.recv(from, rankBlock(r));
    this.list.push(w.steps);
  }
}

const mod = (a: number, n: number): number => ((a % n) + n) % n;
const run = (first: number, count: number, n: number): number[] => Array.from({ length: count }, (_, k) => mod(first + k, n));

function ring(rounds: Rounds, n: number, me: number): void {
  for (let t = 0; t < n - 1; t++) rounds.round(mod(me + 1, n), [mod(me - t, n)], mod(me - 1, n), [mod(me - t - 1, n)]);
}

function recursiveDoubling(rounds: Rounds, n: number, me: number): void {
  const fold = powerOfTwoFold(n);
  const all = run(0, n, n);
  const partner = fold.partnerOf(me);
  const i = fold.indexOf(me);
  if (i < 0) {
    rounds.round(partner, [me], -1, []);
    rounds.recvAllBut(partner, all, me);
    return;
  }
  /** The positions active index j stands for. */
  const positionsOf = (j: number): number[] => {
    const p = fold.positionOf(j);
    const q = fold.partnerOf(p);
    return q < 0 ? [p] : [p, q];
  };
  /** The positions of the aligned run of 2^k active indices containing j. */
  const runOf = (j: number, k: number): number[] => {
    const first = (j >> k) << k;
    return Array.from({ length: 1 << k }, (_, d) => positionsOf(first + d)).flat();
  };
  if (partner >= 0) rounds.round(-1, [], partner, [partner]);
  for (let k = 0; k < log2(fold.active); k++) {
    const q = i ^ (1 << k);
    const peer = fold.positionOf(q);
    rounds.round(peer, runOf(i, k), peer, runOf(q, k));
  }
  if (partner >= 0) rounds.sendAllBut(partner, all);
}

function bruck(rounds: Rounds, n: number, me: number): void {
  for (let d = 1; d < n; d *= 2) {
    const c = Math.min(d, n - d);
    rounds.round(mod(me - d, n), run(me, c, n), mod(me + d, n), run(me + d, c, n));
  }
}

function neighborExchange(rounds: Rounds, n: number, me: number): void {
  const odd = n % 2 === 1;
  const m = odd ? n - 1 : n; // positions 0 … m − 1 run the even scheme
  const last = n - 1;
  if (odd && me === last) {
    rounds.round(m - 1, [last], -1, []);
    rounds.recvAllBut(m - 1, run(0, n, n), last);
    return;
  }
  if (odd && me === m - 1) rounds.round(-1, [], last, [last]);
  const pairs = m / 2;
  /** The positions pair P stands for (n − 2 also for n − 1 when n is odd). */
  const pair = (P: number): number[] => {
    const j = mod(P, pairs);
    return odd && j === pairs - 1 ? [2 * j, 2 * j + 1, last] : [2 * j, 2 * j + 1];
  };
  const P = me >> 1;
  const even = me % 2 === 0;
  const mine = odd && me === m - 1 ? [me, last] : [me];
  const theirs = odd && (me ^ 1) === m - 1 ? [me ^ 1, last] : [me ^ 1];
  rounds.round(me ^ 1, mine, me ^ 1, theirs);
  /** The pair `me` receives in round t ≥ 1. */
  const receivedAt = (t: number): number => (t % 2 === 1 ? (even ? P - (t + 1) / 2 : P + (t + 1) / 2) : even ? P + t / 2 : P - t / 2);
  for (let t = 1; t < pairs; t++) {
    const left = (t % 2 === 1) === even;
    const peer = mod(left ? me - 1 : me + 1, m);
    rounds.round(peer, pair(t === 1 ? P : receivedAt(t - 1)), peer, pair(receivedAt(t)));
  }
  if (odd && me === m - 1) rounds.sendAllBut(last, run(0, n, n));
}

/** holds(i) for every position: integer ranks ≥ 0, no rank held by two positions. */
function checkedHolds(view: GroupView, holds: (position: number) => readonly number[]): number[][] {
  const owner = new Map<number, number>();
  return view.members.map((_, i) => {
    const list = [...holds(i)];
    for (const r of list) {
      if (!Number.isInteger(r) || r < 0) throw new TopocollError('EINVAL', `allgather: position ${i} holds the block of rank ${r}, which is not a rank`);
      const other = owner.get(r);
      if (other !== undefined) throw new TopocollError('EINVAL', `allgather: positions ${other} and ${i} both hold the block of rank ${r}`);
      owner.set(r, i);
    }
    return list;
  });
}

function badAlgorithm(a: string): never {
  throw new TopocollError('ECONFIG', `"${a}" is not an allgather algorithm`, { hint: 'Use ring, recursive-doubling, bruck, neighbor-exchange or shm.' });
}

/**
 * S2's average logical communication distance D of one group's allgather: Σ d / number of
 * messages, over every message, where a message is everything one member sends another in one
 * round (S2's f_ijk: process i sends to process j in step k, whatever it carries) and d is
 * |position of the sender − position of the receiver| (S2's |i − j| on process numbers, not the
 * distance around a ring). `rounds[i]` are the rounds of the member at position i
 * (`groupAllgatherRounds`). With `per: 'block'` every step's block counts as a message of its own
 * instead (a message-size-weighted variant: S2's neighbour exchange sends two blocks per message
 * after the first round, the ring one). 0 when nothing is sent.
 *
 * `shm` sends no messages, but its data still goes from each source straight to every other
 * member: a ShmBcast step at its source counts as a message from the source to every other member
 * (one per receiver and round, or per receiver and block with `per: 'block'`). Every pair then
 * talks directly, so over n members holding one block each D = Σ_{i≠j} |i − j| / (n(n − 1)) =
 * (n + 1)/3 — the distance of a direct exchange, which through shared memory costs nothing extra.
 */
export function averageLogicalDistance(view: GroupView, rounds: readonly (readonly (readonly Step[])[])[], per: 'message' | 'block' = 'message'): number {
  const positionOf = new Map(view.members.map((r, i) => [r, i]));
  let distance = 0;
  let messages = 0;
  rounds.forEach((mine, i) => {
    for (const round of mine) {
      const counted = new Set<number>();
      const count = (to: number): void => {
        if (per === 'message' && counted.has(to)) return;
        counted.add(to);
        const j = positionOf.get(to);
        if (j === undefined) throw new TopocollError('EINVAL', `a step sends to rank ${to}, which is not a member of the group`);
        distance += Math.abs(i - j);
        messages++;
      };
      for (const step of round) {
        if (step.kind === StepKind.Send || step.kind === StepKind.SendRecv) count(step.peer);
        // a publication at its source: to every other member
        if (step.kind === StepKind.ShmBcast && step.peer === view.members[i]) for (const m of view.members) if (m !== step.peer) count(m);
      }
    }
  });
  return messages === 0 ? 0 : distance / messages;
}

/**
 * `averageLogicalDistance` of `algorithm` over n members each holding its own block (S2's
 * setting); `shm` with a stand-in engine id (the distance does not depend on it).
 */
export function allgatherAlcd(algorithm: GroupAllgatherAlgorithm, n: number, per: 'message' | 'block' = 'message'): number {
  const view = positionView(n);
  const own = (i: number): number[] => [i];
  return averageLogicalDistance(
    view,
    view.members.map((_, me) => groupAllgatherRounds(algorithm, view, me, own, { shmGroup: 0 })),
    per,
  );
}
