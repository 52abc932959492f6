/**
 * The step format shared with the C++ executor (native/src/engine.h). A schedule is, for one
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
 * **Rank blocks (allgather).** A range with `of` 0 names one rank block: `first` is a global rank
 * r, `count` is always 1. In an allgather call B is the result vector — the blocks of every rank
 * in rank order, block r holding rank r's contribution, its length count(r) possibly differing
 * per rank (allgatherv), at displacement displ(r). The executor segments allgather's gather phase
 * by columns: in segment k (segment length s elements) rank block r means elements
 * [displ(r) + min(k·s, count(r)), displ(r) + min((k+1)·s, count(r))) of B — empty once k·s ≥
 * count(r); both sides still run the step. A SendRecv whose `range` is a rank block receives the
 * rank block `range2.first` (`range2.count` 1; it shares `of` 0 with `range`). Rank-block steps
 * are Send, Recv, SendRecv and ShmBcast (the `shm` group allgather: each member publishes its
 * own blocks); the encoded words are the same as for any range (`[…, first = r, count = 1,
 * of = 0, …]`). ShmAllgather runs the whole gather phase in one step on the call's block table
 * and names no range. The allgather's bcast phase moves the whole result vector with ordinary
 * ranges, segmented as any bcast.
 *
 * **Reduction order.** RecvReduce and SendRecvReduce combine the incoming data X with B's
 * range: `order` 0 computes B op X (X covers higher ranks than B), 1 computes X op B (X covers
 * lower ranks). Built-in operators are commutative; the order matters for user-defined
 * non-commutative operators, and writing it down keeps every schedule honest about it.
 *
 * **Exchanges.** SendRecv and SendRecvReduce send their range and receive: between two ranks
 * of one node the executor interleaves the two piece by piece (no channel must hold a whole
 * segment); with a peer on another node it sends first and then receives, so the TCP socket
 * buffers (and a channel, when the other peer is local) must hold a whole segment — schedules
 * with exchanges run with segments of at most that (eagerBytes, src/runtime/job-planner.ts).
 * Either way two ranks that exchange, or a ring of them, never wait on each other's send.
 */

/**
 * What a step does (StepKind of native/src/engine.h; test/native-tables.test.ts checks the two
 * agree). A plain object rather than a `const enum` so isolated transpilers agree.
 */
export const StepKind = {
  /** Send B[range] to `peer`. */
  Send: 1,
  /** Receive B[range] from `peer` (overwriting it). */
  Recv: 2,
  /** Receive X from `peer` and combine it into B[range] (see `order`). */
  RecvReduce: 3,
  /**
   * Broadcast B[range] inside a group of one node through the shared-memory engine (S0): every
   * member runs this one step; `peer` is the group's source, `group` its id with the engine.
   */
  ShmBcast: 4,
  /** Send B[range] to `peer`, then receive B[range2] from `peer2` (overwriting it). */
  SendRecv: 5,
  /** Send B[range] to `peer`, then receive X from `peer2` and combine it into B[range2]. */
  SendRecvReduce: 6,
  /**
   * Reduce inside a group of one node through shared memory (native/src/shm_reduce.h): every
   * member runs this one step; `peer` is the destination, whose B[range] becomes the members'
   * B[range] combined in member (= rank) order; `group` is the group's id with the engine.
   */
  ShmReduce: 7,
  /**
   * Allreduce of B among every rank of a job on one node through one shared area
   * (native/src/shm_allreduce.h): every rank runs this one step and deposits B; with
   * `everyRankCombines` each rank then combines all deposits in rank order, else the last to
   * arrive does and every rank copies its result. Messages ≤ 8 KiB.
   */
  ShmAllreduce: 8,
  /**
   * Allgather among every rank of a job on one node through the same area: the whole gather
   * phase in one step (segment: the longest block), in rounds of 64 KiB columns. Every rank
   * deposits its column; with `everyRankCombines` each rank waits for every deposit itself, else
   * the last to arrive tells all; then each copies every column to its place.
   */
  ShmAllgather: 9,
  /**
   * Bcast of B (≤ 8 KiB) from `peer` among every rank of a job on one node through the same
   * area, one way: every rank deposits its header (`peer` also B) and marks its slot; `peer`
   * returns at once, the others wait for its mark and copy B out.
   */
  ShmAreaBcast: 10,
  /**
   * Reduce of B (≤ 8 KiB) to `peer` among every rank of a job on one node through the same
   * area, one way: every rank deposits B; the others return at once, `peer` waits for every
   * deposit and combines them in rank order.
   */
  ShmAreaReduce: 11,
  /**
   * Allreduce of a one-node job whose send and recv buffers are shared windows, the whole call
   * in one step of the reduce phase (native Engine::WindowAllreduce): every rank publishes where
   * its buffers lie, combines its slice straight out of every rank's send into its own recv,
   * then copies every other slice out of its owner's recv — single copy, meetings through the
   * area (`everyRankCombines` picks their protocol).
   */
  ShmWindowAllreduce: 12,
  /**
   * S1's one-sided bcast (algorithms/one-sided-bcast.ts; native Engine::RunOneSided): put
   * B[range] into `peer`'s B. On this node the data goes straight into `peer`'s part of the
   * shared window B lies in, at the offset B has in this rank's part, then a descriptor and the
   * arrival flag (native/src/shm_window.h); to another node it is a Send.
   */
  Put: 13,
  /** Wait until `peer`'s Put into B arrived (from another node: a Recv into B). `pollMicros`: S1's sleep between polls, 0 the doorbell. */
  AwaitPut: 14,
  /** Tell the bcast's root `peer` this rank has its data and forwarded it: on this node 1 added to the root's done counter, else an empty message. */
  CountDone: 15,
  /** The root (`peer` is itself): wait until every other rank counted itself done (S1's RMABcastFlush). `pollMicros` as AwaitPut. */
  AwaitDone: 16,
  /**
   * Allgather of a one-node job whose blocks lie in shared windows (each rank's send, or its
   * recv for IN_PLACE), the whole gather phase in one step (native Engine::WindowAllgather):
   * every rank publishes where its block lies, copies every other block straight out of its
   * owner's window into its place in the result, then meets the others once more — single copy,
   * meetings through the area (`everyRankCombines` picks their protocol).
   */
  ShmWindowAllgather: 17,
} as const;
export type StepKind = (typeof StepKind)[keyof typeof StepKind];

/** Blocks [first, first + count) of a segment cut into `of` blocks. */
export interface BlockRange {
  first: number;
  count: number;
  of: number;
}

export const WHOLE: BlockRange = { first: 0, count: 1, of: 1 };

/** `of` of a rank-block range (see "Rank blocks" above). */
export const RANK_BLOCKS = 0;

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
  /** ShmAllreduce: every rank combines the deposits (else the last to arrive does); ShmAllgather: every rank waits for each deposit; ShmWindowAllreduce, ShmWindowAllgather: their meetings' protocol. */
  everyRankCombines?: boolean;
  /** AwaitPut, AwaitDone: microseconds slept between polls (S1's helper thread); 0 or absent: the engine's doorbell wait. */
  pollMicros?: number;
}

/** `allgather`: the gather phase of an allgather (rank-block ranges); its bcast phase is a `bcast`. */
export type CollectiveKind = 'bcast' | 'reduce' | 'allgather';

export interface Schedule {
  collective: CollectiveKind;
  root: number;
  steps: Step[];
}

/** Int32 words per encoded step (native/src/engine.h, `Step`; test/native-tables.test.ts checks it). */
export const STEP_WORDS = 12;

/**
 * The form the C++ executor receives, per step in order:
 * `[kind, peer, level, group (AwaitPut, AwaitDone: pollMicros), first, count, of, peer2, first2, count2, order, everyRankCombines]`.
 */
export function encodeSchedule(s: Schedule): Int32Array {
  const out = new Int32Array(s.steps.length * STEP_WORDS);
  s.steps.forEach((step, i) => {
    const range = step.range ?? WHOLE;
    const at = i * STEP_WORDS;
    out[at] = step.kind;
    out[at + 1] = step.peer;
    out[at + 2] = step.level;
    out[at + 3] = step.kind === StepKind.AwaitPut || step.kind === StepKind.AwaitDone ? (step.pollMicros ?? 0) : (step.group ?? 0);
    out[at + 4] = range.first;
    out[at + 5] = range.count;
    out[at + 6] = range.of;
    out[at + 7] = step.peer2 ?? -1;
    out[at + 8] = step.range2?.first ?? 0;
    out[at + 9] = step.range2?.count ?? 0;
    out[at + 10] = step.order ?? 0;
    out[at + 11] = step.everyRankCombines === true ? 1 : 0;
  });
  return out;
}

/** Inverse of `encodeSchedule` (defaults made explicit only where they were given), for tests and diagnostics. */
export function decodeSteps(words: Int32Array): Step[] {
  const steps: Step[] = [];
  for (let at = 0; at + STEP_WORDS <= words.length; at += STEP_WORDS) {
    const kind = words[at]! as StepKind;
    const step: Step = { kind, peer: words[at + 1]!, level: words[at + 2]! };
    if (kind === StepKind.ShmBcast || kind === StepKind.ShmReduce) step.group = words[at + 3]!;
    if ((kind === StepKind.AwaitPut || kind === StepKind.AwaitDone) && words[at + 3]! !== 0) step.pollMicros = words[at + 3]!;
    const range = { first: words[at + 4]!, count: words[at + 5]!, of: words[at + 6]! };
    if (range.first !== 0 || range.count !== 1 || range.of !== 1) step.range = range;
    if (kind === StepKind.SendRecv || kind === StepKind.SendRecvReduce) {
      step.peer2 = words[at + 7]!;
      step.range2 = { first: words[at + 8]!, count: words[at + 9]! };
    }
    if (kind === StepKind.RecvReduce || kind === StepKind.SendRecvReduce) step.order = words[at + 10]! === 1 ? 1 : 0;
    const area =
      kind === StepKind.ShmAllreduce || kind === StepKind.ShmAllgather || kind === StepKind.ShmWindowAllreduce || kind === StepKind.ShmWindowAllgather;
    if (area && words[at + 11] === 1) step.everyRankCombines = true;
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
