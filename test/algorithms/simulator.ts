import { StepKind, WHOLE, blockElements, type BlockRange, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import type { GroupPlan } from '../../src/groups/plan.js';

/**
 * Runs every rank's schedule together on buffers of `elements` values per segment, with the
 * semantics of schedule.ts: every step works on the rank's B; ranges are block ranges of the
 * segment (`blockElements`); the step list runs once per segment. Rank-block ranges (`of` 0, an
 * allgather's gather phase) need `rankBlockElements` = e: block r of a segment is its elements
 * [r·e, (r+1)·e) — every rank's block equally long, each segment holding one column slice of
 * every block, which is the executor's column segmentation with segment length e.
 *
 * Transport: per ordered pair (sender, receiver) a FIFO of messages. The send half of
 * SendRecv/SendRecvReduce is eager (it completes into the FIFO at once); a plain Send is eager
 * too, or with `transport: 'rendezvous'` completes only when the receiver has taken the message.
 * ShmBcast: the source publishes B[range] and goes on; every reader copies the next
 * publication of its (source, group, level) — a reader whose range or segment differs from the
 * publication's is an error (rank-block ranges included: the shm allgather publishes one block per
 * step, several in a row from one source). With `transport: 'rendezvous'` and the group's members in
 * `shmGroups`, a publication completes at its source only once every other member has copied it
 * (a queue of no buffering: stricter than S0's). ShmReduce: every member of `shmGroups.get(group)`
 * contributes B[range]; once all have, the destination's B[range] becomes their left-to-right
 * combination in member order, and every member goes on.
 *
 * Recorded as errors: a received message whose level, block range or segment differ from the
 * receiving step's (the executor would see a mismatched header); sending an element the rank
 * does not hold (undefined); combining with an element nobody holds; a bad range or peer; a
 * message nobody received. Ranks left with steps to do are `stuck` (a deadlock).
 */
export type Transport = 'eager' | 'rendezvous';

export interface SimulationOptions<V> {
  /** Elements per segment. */
  elements: number;
  /** How many segments the step lists run for (default 1). */
  segments?: number;
  /** B of `rank` at the start; undefined marks an element the rank does not hold. */
  initial: (rank: number, element: number, segment: number) => V | undefined;
  /** The operator: RecvReduce with order 0 computes combine(B, X), order 1 combine(X, B). */
  combine?: (left: V, right: V) => V;
  transport?: Transport;
  /** Members (global ranks) of every shared-memory group id, for ShmReduce (and rendezvous ShmBcast). */
  shmGroups?: ReadonlyMap<number, readonly number[]>;
  /** Elements per rank block per segment, for ranges with `of` 0; such ranges are errors without it. */
  rankBlockElements?: number;
  /**
   * A message may land in a block range other than the one it left, of as many elements (scan's
   * slots: the executor checks only the length); without it the ranges must be the same.
   */
  anyRangeOfSameLength?: boolean;
  /**
   * Observers of causality: `onSend(from, to)` runs when a send is posted and returns a token
   * the message carries; `onReceive(at, from, token)` runs when a receive takes the message.
   * (A rendezvous Send completing tells the sender nothing here: only messages carry causality.)
   */
  onSend?: (from: number, to: number) => unknown;
  onReceive?: (at: number, from: number, token: unknown) => void;
}

export interface Simulation<V> {
  /** Every rank executed every step. */
  finished: boolean;
  /** Ranks blocked forever, with the step and segment they are stuck on. */
  stuck: { rank: number; step: Step; segment: number }[];
  errors: string[];
  /** Final B of every rank, segment after segment. */
  buffers: (V | undefined)[][];
  /** Point-to-point messages delivered, as [from, to, level]. */
  messages: [number, number, number][];
}

interface Message<V> {
  from: number;
  level: number;
  segment: number;
  range: BlockRange;
  values: (V | undefined)[];
  taken: boolean;
  token?: unknown;
  /** A CountDone (carries nothing; only AwaitDone takes it). */
  done?: boolean;
}

/** The range of a CountDone: no elements. */
const NOTHING: BlockRange = { first: 0, count: 0, of: 1 };

export function simulate<V>(schedules: readonly Schedule[], options: SimulationOptions<V>): Simulation<V> {
  return new Run(schedules, options).result();
}

const MAX_ERRORS = 20;

class Run<V> {
  private readonly n: number;
  private readonly elements: number;
  private readonly segments: number;
  private readonly pc: Int32Array;
  private readonly posted: (Message<V> | undefined)[];
  private readonly buffers: (V | undefined)[][];
  private readonly fifos = new Map<string, Message<V>[]>();
  private readonly published = new Map<string, { range: BlockRange; segment: number; values: (V | undefined)[]; readers: number }[]>();
  private readonly readCursor = new Map<string, number>();
  private readonly reduceRounds = new Map<string, Map<number, { range: BlockRange; values: (V | undefined)[] }>[]>();
  private readonly joined: boolean[];
  private readonly errors: string[] = [];
  private readonly messages: [number, number, number][] = [];

  constructor(
    private readonly schedules: readonly Schedule[],
    private readonly options: SimulationOptions<V>,
  ) {
    this.n = schedules.length;
    this.elements = options.elements;
    this.segments = options.segments ?? 1;
    this.pc = new Int32Array(this.n);
    this.posted = new Array(this.n).fill(undefined);
    this.joined = new Array<boolean>(this.n).fill(false);
    this.buffers = Array.from({ length: this.n }, (_, r) =>
      Array.from({ length: this.elements * this.segments }, (_, i) => options.initial(r, i % this.elements, Math.floor(i / this.elements))),
    );
  }

  result(): Simulation<V> {
    for (let progress = true; progress;) {
      progress = false;
      for (let a = 0; a < this.n; a++) while (this.advance(a)) progress = true;
    }
    const stuck: Simulation<V>['stuck'] = [];
    for (let r = 0; r < this.n; r++) {
      const at = this.current(r);
      if (at !== undefined) stuck.push({ rank: r, step: at.step, segment: at.segment });
    }
    for (const [pair, fifo] of this.fifos) if (fifo.length > 0) this.error(`${fifo.length} message(s) ${pair} never received`);
    return { finished: stuck.length === 0, stuck, errors: this.errors, buffers: this.buffers, messages: this.messages };
  }

  private current(r: number): { step: Step; segment: number; index: number } | undefined {
    const steps = this.schedules[r]!.steps;
    if (steps.length === 0 || this.pc[r]! >= steps.length * this.segments) return undefined;
    const index = this.pc[r]! % steps.length;
    return { step: steps[index]!, segment: Math.floor(this.pc[r]! / steps.length), index };
  }

  /** Tries rank a's current step; true when it completed it or posted its send. */
  private advance(a: number): boolean {
    const at = this.current(a);
    if (at === undefined) return false;
    const { step: s, segment } = at;
    const where = `rank ${a} step ${at.index} (segment ${segment})`;
    if (!this.validPeers(s, a, where)) return this.complete(a);
    switch (s.kind) {
      // A Put is a Send to the simulator: with 'rendezvous' it completes once the child took it
      // (the native put waits for the child to enter the call); AwaitPut is its Recv.
      case StepKind.Send:
      case StepKind.Put: {
        const posted = this.posted[a] === undefined;
        if (posted) this.posted[a] = this.post(a, s.peer, s.level, segment, s.range ?? WHOLE, where);
        if ((this.options.transport ?? 'eager') === 'eager' || this.posted[a]!.taken) return this.complete(a);
        return posted;
      }
      case StepKind.Recv:
      case StepKind.RecvReduce:
      case StepKind.AwaitPut:
        return this.receive(a, s.peer, s, segment, s.range ?? WHOLE, where) && this.complete(a);
      case StepKind.SendRecv:
      case StepKind.SendRecvReduce: {
        const range = s.range ?? WHOLE;
        const posted = this.posted[a] === undefined;
        if (posted) this.posted[a] = this.post(a, s.peer, s.level, segment, range, where);
        const range2 = { first: s.range2?.first ?? -1, count: s.range2?.count ?? -1, of: range.of };
        return (this.receive(a, s.peer2!, s, segment, range2, where) && this.complete(a)) || posted;
      }
      case StepKind.CountDone:
        this.post(a, s.peer, s.level, segment, NOTHING, where).done = true;
        return this.complete(a);
      case StepKind.AwaitDone:
        return this.awaitDone(a, s, segment, where) && this.complete(a);
      case StepKind.ShmBcast: {
        const publishing = s.peer === a && !this.joined[a];
        return (this.shm(a, s, segment, where) && this.complete(a)) || publishing;
      }
      case StepKind.ShmReduce: {
        const joined = !this.joined[a];
        return (this.shmReduce(a, s, segment, where) && this.complete(a)) || joined;
      }
      default:
        this.error(`${where}: unknown step kind ${String(s.kind)}`);
        return this.complete(a);
    }
  }

  private complete(a: number): true {
    this.posted[a] = undefined;
    this.joined[a] = false;
    this.pc[a]!++;
    return true;
  }

  private validPeers(s: Step, a: number, where: string): boolean {
    const peers = s.kind === StepKind.SendRecv || s.kind === StepKind.SendRecvReduce ? [s.peer, s.peer2] : [s.peer];
    const bad = peers.filter(
      (p) =>
        p === undefined ||
        !Number.isInteger(p) ||
        p < 0 ||
        p >= this.n ||
        (p === a && s.kind !== StepKind.ShmBcast && s.kind !== StepKind.ShmReduce && s.kind !== StepKind.AwaitDone),
    );
    if (bad.length > 0) this.error(`${where}: bad peer ${bad.join(', ')}`);
    return bad.length === 0;
  }

  private post(a: number, to: number, level: number, segment: number, range: BlockRange, where: string): Message<V> {
    const values = this.read(a, segment, range, where);
    const message: Message<V> = { from: a, level, segment, range, values, taken: false, token: this.options.onSend?.(a, to) };
    const key = `${a}→${to}`;
    let fifo = this.fifos.get(key);
    if (fifo === undefined) this.fifos.set(key, (fifo = []));
    fifo.push(message);
    return message;
  }

  private receive(a: number, from: number, s: Step, segment: number, range: BlockRange, where: string): boolean {
    const message = this.fifos.get(`${from}→${a}`)?.shift();
    if (message === undefined) return false;
    message.taken = true;
    if (message.done === true) this.error(`${where}: a receive met rank ${from}'s CountDone`);
    this.messages.push([from, a, message.level]);
    this.options.onReceive?.(a, from, message.token);
    const sent = message.range;
    if (message.level !== s.level) this.error(`${where}: message ${from}→${a} on level ${message.level} met a receive on level ${s.level}`);
    if (message.segment !== segment) this.error(`${where}: message ${from}→${a} of segment ${message.segment} met a receive of segment ${segment}`);
    const differs = this.options.anyRangeOfSameLength
      ? message.values.length !== this.lengthOf(range, where)
      : sent.first !== range.first || sent.count !== range.count || sent.of !== range.of;
    if (differs) {
      this.error(
        `${where}: message ${from}→${a} carries blocks ${sent.first}+${sent.count}/${sent.of}, the receive expects ${range.first}+${range.count}/${range.of}`,
      );
      return true;
    }
    const reduce = s.kind === StepKind.RecvReduce || s.kind === StepKind.SendRecvReduce;
    this.write(a, segment, range, message.values, reduce ? (s.order ?? 0) : undefined, where);
    return true;
  }

  /** The root of a one-sided bcast: true once every other rank's CountDone of this segment is there (all taken at once). */
  private awaitDone(a: number, s: Step, segment: number, where: string): boolean {
    if (s.peer !== a) this.error(`${where}: AwaitDone names rank ${s.peer}, not the rank itself`);
    const heads: Message<V>[] = [];
    for (let r = 0; r < this.n; r++) {
      if (r === a) continue;
      const head = this.fifos.get(`${r}→${a}`)?.[0];
      if (head === undefined) return false;
      heads.push(head);
    }
    for (const head of heads) {
      this.fifos.get(`${head.from}→${a}`)!.shift();
      head.taken = true;
      if (head.done !== true) this.error(`${where}: AwaitDone met a message from ${head.from} that is not a CountDone`);
      if (head.segment !== segment) this.error(`${where}: CountDone from ${head.from} of segment ${head.segment} met AwaitDone in segment ${segment}`);
    }
    return true;
  }

  private shm(a: number, s: Step, segment: number, where: string): boolean {
    const key = `${s.peer}/${s.group ?? 0}/${s.level}`;
    const range = s.range ?? WHOLE;
    let list = this.published.get(key);
    if (list === undefined) this.published.set(key, (list = []));
    if (a === s.peer) {
      if (!this.joined[a]) {
        this.joined[a] = true;
        list.push({ range, segment, values: this.read(a, segment, range, where), readers: 0 });
      }
      const members = this.options.shmGroups?.get(s.group ?? -1);
      if ((this.options.transport ?? 'eager') === 'eager' || members === undefined) return true;
      // its own publication is the last of its list: it publishes nothing else until this one completes
      return list[list.length - 1]!.readers >= members.length - 1;
    }
    const cursor = `${a}@${key}`;
    const next = this.readCursor.get(cursor) ?? 0;
    const publication = list[next];
    if (publication === undefined) return false;
    this.readCursor.set(cursor, next + 1);
    publication.readers++;
    const sent = publication.range;
    if (publication.segment !== segment) this.error(`${where}: ShmBcast from ${s.peer} of segment ${publication.segment} met a reader in segment ${segment}`);
    if (sent.first !== range.first || sent.count !== range.count || sent.of !== range.of) {
      this.error(
        `${where}: ShmBcast from ${s.peer} publishes blocks ${sent.first}+${sent.count}/${sent.of}, the reader expects ${range.first}+${range.count}/${range.of}`,
      );
      return true;
    }
    this.write(a, segment, range, publication.values, undefined, where);
    return true;
  }

  /** Joins rank a's current ShmReduce round; true once every member has joined it. */
  private shmReduce(a: number, s: Step, segment: number, where: string): boolean {
    const members = this.options.shmGroups?.get(s.group ?? -1);
    if (members === undefined || !members.includes(a) || !members.includes(s.peer)) {
      this.error(`${where}: ShmReduce in group ${String(s.group)}, which does not hold ranks ${a} and ${s.peer}`);
      return true;
    }
    const key = `${s.peer}/${s.group}/${s.level}`;
    let rounds = this.reduceRounds.get(key);
    if (rounds === undefined) this.reduceRounds.set(key, (rounds = []));
    const cursor = `${a}@reduce@${key}`;
    const index = this.readCursor.get(cursor) ?? 0;
    const round = (rounds[index] ??= new Map());
    const range = s.range ?? WHOLE;
    if (!this.joined[a]) {
      this.joined[a] = true;
      round.set(a, { range, values: this.read(a, segment, range, where) });
    }
    if (round.size < members.length) return false;
    this.readCursor.set(cursor, index + 1);
    if (a !== s.peer) return true;
    const parts = members.map((m) => round.get(m)!);
    if (parts.some((p) => p.range.first !== range.first || p.range.count !== range.count || p.range.of !== range.of)) {
      this.error(`${where}: ShmReduce members disagree on the range`);
      return true;
    }
    const combine = this.options.combine;
    const values = parts[0]!.values.map((_, e) =>
      parts.map((p) => p.values[e]).reduce((l, r) => (l === undefined || r === undefined || combine === undefined ? undefined : combine(l, r))),
    );
    this.write(a, segment, range, values, undefined, where);
    return true;
  }

  /** B[range] of rank a; an element it does not hold is an error. */
  private read(a: number, segment: number, range: BlockRange, where: string): (V | undefined)[] {
    const [start, end] = this.elementsOf(range, where);
    const base = segment * this.elements;
    const values = this.buffers[a]!.slice(base + start, base + end);
    const missing = values.findIndex((v) => v === undefined);
    if (missing >= 0) this.error(`${where}: sends element ${start + missing} it does not hold`);
    return values;
  }

  /** Writes (order undefined) or combines `values` into B[range] of rank a. */
  private write(a: number, segment: number, range: BlockRange, values: (V | undefined)[], order: 0 | 1 | undefined, where: string): void {
    const [start, end] = this.elementsOf(range, where);
    const base = segment * this.elements;
    const b = this.buffers[a]!;
    for (let e = start; e < end; e++) {
      const x = values[e - start];
      if (order === undefined) {
        b[base + e] = x;
        continue;
      }
      const mine = b[base + e];
      if (mine === undefined || x === undefined || this.options.combine === undefined) {
        this.error(`${where}: cannot combine element ${e}`);
        continue;
      }
      b[base + e] = order === 0 ? this.options.combine(mine, x) : this.options.combine(x, mine);
    }
  }

  private lengthOf(range: BlockRange, where: string): number {
    const [start, end] = this.elementsOf(range, where);
    return end - start;
  }

  private elementsOf(range: BlockRange, where: string): [number, number] {
    const { first, count, of } = range;
    if (of === 0) {
      const e = this.options.rankBlockElements;
      if (e === undefined || !Number.isInteger(first) || first < 0 || count !== 1 || (first + 1) * e > this.elements) {
        this.error(`${where}: bad rank-block range ${first}+${count}/0 (${e ?? 'no'} elements per rank block, ${this.elements} per segment)`);
        return [0, 0];
      }
      return [first * e, (first + 1) * e];
    }
    if (![first, count, of].every(Number.isInteger) || of < 1 || first < 0 || count < 0 || first + count > of) {
      this.error(`${where}: bad range ${first}+${count}/${of}`);
      return [0, 0];
    }
    return blockElements(this.elements, first, count, of);
  }

  private error(text: string): void {
    if (this.errors.length < MAX_ERRORS) this.errors.push(text);
  }
}

/** Every step's peers are members of the group of level `step.level` in the rank's chain. */
export function outOfGroupSteps(plan: GroupPlan, schedules: readonly Schedule[]): string[] {
  const bad: string[] = [];
  schedules.forEach((s, rank) => {
    const chain = plan.chain(rank);
    for (const step of s.steps) {
      const level = plan.levels[step.level];
      const g = chain.find((c) => c.level === level);
      for (const peer of step.peer2 === undefined ? [step.peer] : [step.peer, step.peer2]) {
        if (g === undefined || !g.members.includes(peer)) bad.push(`rank ${rank} → ${peer} on level ${step.level} (${level})`);
      }
    }
  });
  return bad;
}

/**
 * Reduction values as terms that keep the parenthesization: a contribution is `rank/segment/element`,
 * combining two is `(left right)`. Equal strings are bitwise-equal results of any operator.
 */
export const contribution = (rank: number, element: number, segment: number): string => `${rank}/${segment}/${element}`;

export const combineTerms = (left: string, right: string): string => `(${left} ${right})`;

/** The contributions of a term, left to right. */
export function termContributions(term: string): { rank: number; segment: number; element: number }[] {
  return [...term.matchAll(/(\d+)\/(\d+)\/(\d+)/g)].map((m) => ({ rank: Number(m[1]), segment: Number(m[2]), element: Number(m[3]) }));
}

/**
 * Problems with a reduced term for (segment, element): every contribution must be of that
 * element, and the ranks, left to right, must be `expected` (or, when `anyOrder`, a permutation).
 */
export function termProblems(term: string | undefined, segment: number, element: number, expected: readonly number[], anyOrder: boolean): string[] {
  if (term === undefined) return [`segment ${segment} element ${element}: no value`];
  const parts = termContributions(term);
  const problems: string[] = [];
  if (parts.some((p) => p.segment !== segment || p.element !== element)) problems.push(`segment ${segment} element ${element}: mixes elements in ${term}`);
  const ranks = parts.map((p) => p.rank);
  if (anyOrder) ranks.sort((a, b) => a - b);
  const want = anyOrder ? [...expected].sort((a, b) => a - b) : expected;
  if (ranks.join(',') !== want.join(',')) problems.push(`segment ${segment} element ${element}: ranks ${ranks.join(',')}, expected ${want.join(',')}`);
  return problems;
}
