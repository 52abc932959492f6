import { TopocollError } from '../errors.js';
import type {
  AllreduceAlgorithm,
  BcastAlgorithm,
  GroupAllgatherAlgorithm,
  GroupBarrierAlgorithm,
  GroupGatherAlgorithm,
  ReduceAlgorithm,
} from './algorithm-choice.js';
import type { LevelCosts } from './cost-model.js';
import { groupAllgatherSteps } from './group-allgather.js';
import { groupAllreduceSteps } from './group-allreduce.js';
import { arriveInformsAll, groupBarrierSteps } from './group-barrier.js';
import { groupBcastSteps } from './group-bcast.js';
import { groupGatherSteps, groupScatterSteps } from './group-gather.js';
import { groupReduceSteps } from './group-reduce.js';
import { groupReduceScatterSteps, type GroupReduceScatterAlgorithm } from './group-reduce-scatter.js';
import { positionView, type GroupView } from './group-steps.js';
import { RANK_BLOCKS, StepKind, type Step } from './schedule.js';

/**
 * A group whose members outnumber the cores they may run on (issue 18). cost-model.ts's formulas
 * follow the longest chain of dependent messages and assume every member runs when its message
 * arrives. When members take turns on fewer cores, the cores also have to do every member's share
 * of the work one after another, so a call takes at least the group's whole work divided by its
 * cores (Brent's bound: time ≥ max(span, work / cores)). When every member is bound to one CPU,
 * each core must also run the work of the members bound to it one after another, so the call
 * takes at least the most loaded core's share (at least the average, and more where a root or
 * leader shares its core). The prediction is the largest of these bounds.
 *
 * The work is counted on the schedule itself — every member's steps, as the group algorithms
 * write them (group-*.ts), with the source, destination or leader at position 0 — on the
 * level's LogGP link (for such a group the oversubscribed link, measured with two ranks on one
 * core):
 *   send                o_s
 *   receive of b bytes  o_r + L + b·G     (L: on a shared core, the receiver must be switched in)
 *   combine of b bytes  b / combineBytesPerUs
 * a SendRecv* counts as its send and its receive. The shared-memory algorithms have one step per
 * member and are counted from what the engine does: S0's bcast of m among n is the source's copy
 * in and every reader's wake-up and copy out, o_s + (n − 1)·(o_r + L) + n·m·G; the shm allgather
 * is n such publications of b bytes; the shm reduce every member's copy in, a wake-up per member
 * and (n − 1)·m of combining.
 *
 * Every count is linear in the message size, so one schedule per (collective, algorithm, n)
 * gives it for every size (memoised).
 */

/** The collectives of a group whose work is counted. */
export type WorkCollective = 'bcast' | 'reduce' | 'allreduce' | 'allgather' | 'gather' | 'scatter' | 'reduce-scatter' | 'barrier';

/** Any group algorithm of the collectives above. */
export type WorkAlgorithm =
  BcastAlgorithm | ReduceAlgorithm | AllreduceAlgorithm | GroupAllgatherAlgorithm | GroupGatherAlgorithm | GroupReduceScatterAlgorithm | GroupBarrierAlgorithm;

/** A group's work as counts: sends, receives, and bytes received and combined per byte of message (per member, for allgather, gather, scatter and reduce-scatter). */
export interface WorkCounts {
  sends: number;
  receives: number;
  /** Bytes received, per byte of the message. */
  receivedPerByte: number;
  /** Bytes combined, per byte of the message. */
  combinedPerByte: number;
}

const memo = new Map<string, readonly WorkCounts[]>();

/** Distinct CPUs `members` may run on (across machines: co-runners.ts, machineOf), or Infinity when any member's CPUs are unknown. */
export function groupCores(members: readonly number[], cpus: readonly { machine: string; cpus: readonly number[] }[]): number {
  const seen = new Set<string>();
  for (const m of members) {
    const where = cpus[m];
    if (where === undefined || where.cpus.length === 0) return Infinity;
    for (const c of where.cpus) seen.add(`${where.machine}\0${c}`);
  }
  return seen.size;
}

/**
 * Whether the ranks of some machine outnumber the CPUs they may run on (groupCores of each
 * machine's ranks): every rank computes the same from the same sets. False where a rank's CPUs
 * are unknown.
 */
export function someMachineShared(cpus: readonly { machine: string; cpus: readonly number[] }[]): boolean {
  const byMachine = new Map<string, number[]>();
  cpus.forEach((where, rank) => byMachine.set(where.machine, [...(byMachine.get(where.machine) ?? []), rank]));
  for (const members of byMachine.values()) if (members.length > groupCores(members, cpus)) return true;
  return false;
}

/**
 * Per position of `members`, an index naming the one CPU that member is bound to (equal indices:
 * the same CPU of the same host); undefined unless every member is bound to exactly one CPU.
 */
export function memberCores(members: readonly number[], cpus: readonly { machine: string; cpus: readonly number[] }[]): number[] | undefined {
  const index = new Map<string, number>();
  const of: number[] = [];
  for (const m of members) {
    const where = cpus[m];
    if (where === undefined || where.cpus.length !== 1) return undefined;
    const key = `${where.machine}\0${where.cpus[0]}`;
    if (!index.has(key)) index.set(key, index.size);
    of.push(index.get(key)!);
  }
  return of;
}

const NO_WORK: WorkCounts = { sends: 0, receives: 0, receivedPerByte: 0, combinedPerByte: 0 };

/** Each member's work counts in one group's call, by position (memoised per collective, algorithm and n). */
export function memberWorkCounts(collective: WorkCollective, algorithm: WorkAlgorithm, n: number): readonly WorkCounts[] {
  if (!Number.isInteger(n) || n < 1) throw new TopocollError('EINVAL', `core sharing: group size ${n} is not a positive integer`);
  const key = `${collective}|${JSON.stringify(algorithm)}|${n}`;
  let counts = memo.get(key);
  if (counts === undefined) {
    counts = n === 1 ? [NO_WORK] : count(collective, algorithm, n);
    memo.set(key, counts);
  }
  return counts;
}

/** The whole group's work counts of one call: its members' summed. */
export function workCounts(collective: WorkCollective, algorithm: WorkAlgorithm, n: number): WorkCounts {
  const total = { ...NO_WORK };
  for (const w of memberWorkCounts(collective, algorithm, n)) {
    total.sends += w.sends;
    total.receives += w.receives;
    total.receivedPerByte += w.receivedPerByte;
    total.combinedPerByte += w.combinedPerByte;
  }
  return total;
}

/** µs of `w` on a message of `bytes` (per member, for allgather) on `c`'s link: the counts priced. */
function priceUs(w: WorkCounts, bytes: number, c: LevelCosts): number {
  const { link } = c;
  return w.sends * link.os + w.receives * (link.or + link.L) + bytes * (w.receivedPerByte * link.G + w.combinedPerByte / c.combineBytesPerUs);
}

/** µs of work of one group's call of `bytes` (per member, for allgather) on `c`'s link: the counts priced. */
export function workUs(collective: WorkCollective, algorithm: WorkAlgorithm, n: number, bytes: number, c: LevelCosts): number {
  return priceUs(workCounts(collective, algorithm, n), bytes, c);
}

/**
 * The prediction of a group whose members run on `cores` cores: the formula's `spanUs`, or the
 * work divided among the cores when that is more, or the most loaded core's work when that is
 * more still (`coreOf`: memberCores' index per position; only when the members outnumber the
 * cores).
 */
export function coreBoundUs(
  spanUs: number,
  collective: WorkCollective,
  algorithm: WorkAlgorithm,
  n: number,
  bytes: number,
  c: LevelCosts,
  cores: number,
  coreOf?: readonly number[],
): number {
  if (!(n > cores)) return spanUs;
  let bound = Math.max(spanUs, workUs(collective, algorithm, n, bytes, c) / Math.max(1, cores));
  if (coreOf !== undefined && coreOf.length === n) {
    const load = new Map<number, number>();
    memberWorkCounts(collective, algorithm, n).forEach((w, position) => {
      const core = coreOf[position]!;
      load.set(core, (load.get(core) ?? 0) + priceUs(w, bytes, c));
    });
    bound = Math.max(bound, ...load.values());
  }
  return bound;
}

function count(collective: WorkCollective, algorithm: WorkAlgorithm, n: number): WorkCounts[] {
  if (algorithm === 'shm') {
    const each = (w: WorkCounts): WorkCounts[] => Array.from({ length: n }, () => ({ ...w }));
    if (collective === 'bcast') {
      // The source copies in; every reader is woken and copies out.
      return [
        { sends: 1, receives: 0, receivedPerByte: 1, combinedPerByte: 0 },
        ...each({ sends: 0, receives: 1, receivedPerByte: 1, combinedPerByte: 0 }).slice(1),
      ];
    }
    // Every member publishes its block and reads the others'.
    if (collective === 'allgather') return each({ sends: 1, receives: n - 1, receivedPerByte: n, combinedPerByte: 0 });
    // Every member copies in and is woken; the combining is shared among them.
    if (collective === 'reduce') return each({ sends: 0, receives: 1, receivedPerByte: 1, combinedPerByte: (n - 1) / n });
    throw new TopocollError('EINVAL', `core sharing: no shm ${collective}`);
  }
  const view = positionView(n);
  return Array.from({ length: n }, (_, me) => {
    const mine = { ...NO_WORK };
    for (const step of memberSteps(collective, algorithm, view, me)) addStep(mine, step, n);
    return mine;
  });
}

function memberSteps(collective: WorkCollective, algorithm: WorkAlgorithm, view: GroupView, me: number): Step[] {
  switch (collective) {
    case 'bcast':
      return groupBcastSteps(algorithm as BcastAlgorithm, view, 0, me);
    case 'reduce':
      return groupReduceSteps(algorithm as ReduceAlgorithm, view, 0, me);
    case 'allreduce':
      return groupAllreduceSteps(algorithm as AllreduceAlgorithm, view, me);
    case 'allgather':
      return groupAllgatherSteps(algorithm as GroupAllgatherAlgorithm, view, me, (position) => [position]);
    case 'gather':
      return groupGatherSteps(algorithm as GroupGatherAlgorithm, view, 0, me, (position) => [position]);
    case 'scatter':
      return groupScatterSteps(algorithm as GroupGatherAlgorithm, view, 0, me, (position) => [position]);
    case 'reduce-scatter':
      return groupReduceScatterSteps(algorithm as GroupReduceScatterAlgorithm, view, me, (position) => [position]);
    case 'barrier': {
      // As the barrier formulas: one group's barrier, its release left out where the arrive informs every member.
      const { arrive, release } = groupBarrierSteps(algorithm as GroupBarrierAlgorithm, view, me);
      return arriveInformsAll(algorithm as GroupBarrierAlgorithm) ? arrive : [...arrive, ...release];
    }
  }
}

/** Bytes of `range` per byte of the message: a fraction of the segment, or rank blocks (one block = the message). */
function perByte(range: { count: number; of: number } | undefined): number {
  if (range === undefined) return 1;
  return range.of === RANK_BLOCKS ? range.count : range.count / range.of;
}

function addStep(total: WorkCounts, step: Step, n: number): void {
  const received = (): number => perByte(step.range2 === undefined ? step.range : { count: step.range2.count, of: step.range?.of ?? 1 });
  switch (step.kind) {
    case StepKind.Send:
      total.sends++;
      return;
    case StepKind.Recv:
    case StepKind.RecvReduce: {
      const b = perByte(step.range);
      total.receives++;
      total.receivedPerByte += b;
      if (step.kind === StepKind.RecvReduce) total.combinedPerByte += b;
      return;
    }
    case StepKind.SendRecv:
    case StepKind.SendRecvReduce: {
      const b = received();
      total.sends++;
      total.receives++;
      total.receivedPerByte += b;
      if (step.kind === StepKind.SendRecvReduce) total.combinedPerByte += b;
      return;
    }
    default:
      throw new TopocollError('EINVAL', `core sharing: step kind ${step.kind} in a group schedule of ${n} members`);
  }
}
