import {
  BLOCKS_PAIR_BLOCKS_OF,
  STEP_WORDS,
  StepDefault,
  StepKind,
  StepWord,
  stepHasCount2,
  stepHasEveryRankCombines,
  stepHasFirst2,
  stepHasGroup,
  stepHasJoined,
  stepHasOrder,
  stepHasPeer2,
  stepHasPollMicros,
} from '../abi.generated.js';

/**
 * The step format shared with the C++ executor (native/src/engine/step.h). A schedule is, for one
 * rank and one phase of a collective call, the ordered point-to-point steps it performs; the
 * executor runs them in order, each step blocking until it completes.
 *
 * **Buffer.** Every step works on the phase's one buffer B:
 * - bcast phase: the user's buffer (bcast) or the result buffer `recv` (allreduce, barrier);
 * - reduce phase: the accumulator — `recv` at the root of a reduce and on every rank of an
 *   allreduce, a scratch buffer elsewhere. B starts as a copy of the rank's input. (A rank whose
 *   reduce schedule only sends reads its input directly: nothing is copied.)
 *
 * **Segments.** The executor cuts a message into segments (the call says how long; all ranks
 * use the same length) and runs the whole step list once per segment, in order: segment k moves
 * down (bcast) or up (reduce) one level while segment k + 1 is processed below it — that is the
 * pipelining across levels. Ranges below are relative to the current segment.
 *
 * **Ranges.** A step moves blocks [first, first + count) of the segment cut into `of` equal
 * blocks: block b covers elements [⌊b·n/of⌋, ⌊(b+1)·n/of⌋) of a segment of n elements, so a
 * range may be empty when n < of (the step still runs; both sides agree it carries nothing).
 * The whole segment is first 0, count 1, of 1 (the default).
 *
 * **Rank blocks (allgather, gather, scatter).** A range with `of` 0 names one rank block: `first`
 * is a global rank r, `count` is always 1. In an allgather call B is the result vector — the blocks of every rank
 * in rank order, block r holding rank r's contribution, its length count(r) possibly differing
 * per rank (allgatherv), at displacement displ(r). The executor segments allgather's gather phase
 * by columns: in segment k (segment length s elements) rank block r means elements
 * [displ(r) + min(k·s, count(r)), displ(r) + min((k+1)·s, count(r))) of B — empty once k·s ≥
 * count(r); both sides still run the step. A SendRecv whose `range` is a rank block receives the
 * rank block `range2.first` (`range2.count` 1; it shares `of` 0 with `range`). Rank-block steps
 * are Send, Recv, SendRecv, ShmBcast (the `shm` group allgather: each member publishes its
 * own blocks), RecvReduce and SendRecvReduce (a reduce-scatter's); the encoded words are the
 * same as for any range (`[…, first = r, count = 1, of = 0, …]`). ShmAllgather runs the whole gather phase in one step on the call's block table
 * and names no range. The allgather's bcast phase moves the whole result vector with ordinary
 * ranges, segmented as any bcast. A gather or scatter call has one phase of rank blocks on the
 * whole vector (the root's recv or send, a leader's staging copy), in the same column segments;
 * a rank whose steps move only its own block works on its own buffer instead.
 *
 * **Slots (scan, exscan).** B is `of` slots of the call's n elements (range `{ first: slot,
 * count: 1, of }`, every step of a rank with the same `of`), laid out segment by segment (each
 * column segment's `of` slots side by side): a message may land in another slot than it left —
 * both are the segment's length (scan.ts).
 *
 * **Pair blocks (alltoall, alltoallv).** A range with `of` −1 (`PAIR_BLOCKS`) names one block of
 * an alltoall: `first` = s·p + d is the block rank s sends rank d (p ranks), `count` 1. An
 * alltoall call has one phase, never segmented, whose steps are Send, Recv and SendRecv of pair
 * blocks only; every message carries one whole block and its length (the header's count). The
 * executor finds block (s, d) in the rank's send buffer when s is the rank, in its recv buffer
 * when d is, else in a staging area of its own (a leader's, for blocks passing through it; a
 * staged block's length is the one its message carried). A run of SendRecvs with the same peers,
 * every one but the last `joined`, is one packed exchange: one message each way carrying the
 * run's blocks in step order (an alltoall's only: every block then has the call's length n).
 * See alltoall.ts.
 *
 * **Reduction order.** RecvReduce and SendRecvReduce combine the incoming data X with B's
 * range: `order` 0 computes B op X (X covers higher ranks than B), 1 computes X op B (X covers
 * lower ranks). Built-in operators are commutative; the order matters for user-defined
 * non-commutative operators, and writing it down keeps every schedule honest about it.
 *
 * **Exchanges.** SendRecv and SendRecvReduce send their range and receive: between two ranks
 * of one node the executor interleaves the two piece by piece (no channel must hold a whole
 * segment); so does it between two remote peers over TCP. Otherwise, with a peer on another
 * node, it sends first and then receives, so the carrier (and a channel, when the other peer is
 * local) must hold a whole segment — schedules with such exchanges run with segments of at most
 * that (exchangeLimits, src/runtime/job-planner.ts).
 * Either way two ranks that exchange, or a ring of them, never wait on each other's send.
 */

// What a step does, the words it is encoded as and their defaults are abi/abi.yaml's
// (src/abi.generated.ts; the addon's native/src/base/abi_generated.h comes from the same spec).
export { STEP_WORDS, StepKind } from '../abi.generated.js';

/** Blocks [first, first + count) of a segment cut into `of` blocks. */
export interface BlockRange {
  first: number;
  count: number;
  of: number;
}

export const WHOLE: BlockRange = { first: StepDefault.first, count: StepDefault.count, of: StepDefault.of };

/** `of` of a rank-block range (see "Rank blocks" above). */
export const RANK_BLOCKS = 0;

/** `of` of a pair-block range (see "Pair blocks" above). */
export const PAIR_BLOCKS = BLOCKS_PAIR_BLOCKS_OF;

/** The range naming the block rank `source` sends rank `destination` in an alltoall of `size` ranks. */
export function pairBlock(source: number, destination: number, size: number): BlockRange {
  return { first: source * size + destination, count: 1, of: PAIR_BLOCKS };
}

/** The range naming rank r's block of an allgather's result vector. */
export function rankBlock(rank: number): BlockRange {
  return { first: rank, count: 1, of: RANK_BLOCKS };
}

export interface Step {
  kind: StepKind;
  /** Global rank of the other side (the receiver of a SendRecv*'s send; ShmBcast, ShmAreaBcast: the source; ShmReduce, ShmAreaReduce: the destination). */
  peer: number;
  /** Index into `plan.levels` of the group the step runs in; for diagnostics and message headers. */
  level: number;
  /** ShmBcast: the group id the rank registered with the engine. */
  group?: number;
  /** What is sent or received; the whole segment when absent. */
  range?: BlockRange;
  /** SendRecv*: the rank received from. */
  peer2?: number;
  /** SendRecv*: where the received data goes, in blocks of `range.of` (a rank block when `range.of` is 0). */
  range2?: { first: number; count: number };
  /** RecvReduce, SendRecvReduce: 0 = B op X, 1 = X op B. */
  order?: 0 | 1;
  /** SendRecv of pair blocks: its blocks travel in one message with the next step's (a packed exchange; see "Pair blocks"). */
  joined?: boolean;
  /** ShmAllreduce: every rank combines the deposits (else the last to arrive does); ShmAllgather: every rank waits for each deposit; ShmWindowAllreduce, ShmWindowAllgather: their meetings' protocol. */
  everyRankCombines?: boolean;
  /** AwaitPut, AwaitDone: microseconds slept between polls (S1's helper thread); 0 or absent: the engine's doorbell wait. */
  pollMicros?: number;
}

/**
 * `allgather`: the gather phase of an allgather (rank-block ranges); its bcast phase is a `bcast`.
 * `gather`, `scatter`: rank blocks to and from one root (hierarchical.ts).
 * `scan`: scan's and exscan's one phase on B's slots (scan.ts).
 * `alltoall`: pair blocks between every two ranks (alltoall.ts).
 */
export type CollectiveKind = 'bcast' | 'reduce' | 'allgather' | 'gather' | 'scatter' | 'scan' | 'alltoall';

export interface Schedule {
  collective: CollectiveKind;
  root: number;
  steps: Step[];
}

/**
 * The form the C++ executor receives (native/src/engine/step.h, DecodeSteps): STEP_WORDS int32
 * words per step in order, each field at its StepWord. A field the step's kind does not carry
 * (stepHas…) is written as its StepDefault, so is a field the step leaves out; the group and
 * pollMicros share a word (their kinds are disjoint).
 */
export function encodeSchedule(s: Schedule): Int32Array {
  const out = new Int32Array(s.steps.length * STEP_WORDS);
  s.steps.forEach((step, i) => {
    const { kind } = step;
    const range = step.range ?? WHOLE;
    const at = i * STEP_WORDS;
    out[at + StepWord.kind] = kind;
    out[at + StepWord.peer] = step.peer;
    out[at + StepWord.level] = step.level;
    if (stepHasGroup(kind)) out[at + StepWord.group] = step.group ?? StepDefault.group;
    else if (stepHasPollMicros(kind)) out[at + StepWord.pollMicros] = step.pollMicros ?? StepDefault.pollMicros;
    else out[at + StepWord.group] = StepDefault.group;
    out[at + StepWord.first] = range.first;
    out[at + StepWord.count] = range.count;
    out[at + StepWord.of] = range.of;
    out[at + StepWord.peer2] = stepHasPeer2(kind) ? (step.peer2 ?? StepDefault.peer2) : StepDefault.peer2;
    out[at + StepWord.first2] = stepHasFirst2(kind) ? (step.range2?.first ?? StepDefault.first2) : StepDefault.first2;
    out[at + StepWord.count2] = stepHasCount2(kind) ? (step.range2?.count ?? StepDefault.count2) : StepDefault.count2;
    // order and joined share a word (their kinds are disjoint).
    out[at + StepWord.order] = stepHasOrder(kind)
      ? (step.order ?? StepDefault.order)
      : stepHasJoined(kind)
        ? step.joined === true
          ? 1
          : StepDefault.joined
        : StepDefault.order;
    out[at + StepWord.everyRankCombines] = stepHasEveryRankCombines(kind) && step.everyRankCombines === true ? 1 : StepDefault.everyRankCombines;
  });
  return out;
}

/** Inverse of `encodeSchedule` (defaults made explicit only where they were given), for tests and diagnostics. */
export function decodeSteps(words: Int32Array): Step[] {
  const steps: Step[] = [];
  for (let at = 0; at + STEP_WORDS <= words.length; at += STEP_WORDS) {
    const kind = words[at + StepWord.kind]! as StepKind;
    const step: Step = { kind, peer: words[at + StepWord.peer]!, level: words[at + StepWord.level]! };
    if (stepHasGroup(kind)) step.group = words[at + StepWord.group]!;
    const pollMicros = words[at + StepWord.pollMicros]!;
    if (stepHasPollMicros(kind) && pollMicros !== StepDefault.pollMicros) step.pollMicros = pollMicros;
    const range = { first: words[at + StepWord.first]!, count: words[at + StepWord.count]!, of: words[at + StepWord.of]! };
    if (range.first !== WHOLE.first || range.count !== WHOLE.count || range.of !== WHOLE.of) step.range = range;
    // peer2, first2 and count2 belong to the same kinds (the exchanges).
    if (stepHasPeer2(kind)) {
      step.peer2 = words[at + StepWord.peer2]!;
      step.range2 = { first: words[at + StepWord.first2]!, count: words[at + StepWord.count2]! };
    }
    if (stepHasOrder(kind)) step.order = words[at + StepWord.order]! === 1 ? 1 : 0;
    if (stepHasJoined(kind) && words[at + StepWord.joined] === 1) step.joined = true;
    if (stepHasEveryRankCombines(kind) && words[at + StepWord.everyRankCombines] === 1) step.everyRankCombines = true;
    steps.push(step);
  }
  return steps;
}

/** Elements [start, end) of blocks [first, first + count) of `of` blocks over n elements (`of` ≥ 1: not for rank blocks). */
export function blockElements(n: number, first: number, count: number, of: number): [number, number] {
  return [Math.floor((first * n) / of), Math.floor(((first + count) * n) / of)];
}

/** Whether a schedule has exchange steps (their segments must fit the transports' buffers). */
export function hasExchanges(s: Schedule): boolean {
  return s.steps.some((step) => step.kind === StepKind.SendRecv || step.kind === StepKind.SendRecvReduce);
}
