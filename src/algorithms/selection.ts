import {
  parseAlgorithm,
  type AllreduceAlgorithm,
  type BcastAlgorithm,
  type GroupAlgorithm,
  type GroupBarrierAlgorithm,
  type ReduceAlgorithm,
} from './algorithm-choice.js';
import { chooseBarrier } from './barrier-model.js';
import type { GroupAllgatherAlgorithm } from './group-allgather.js';
import { topGroup, type AllreduceVariant } from './hierarchical.js';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';

/**
 * Which algorithm every group of a plan runs each collective with, per message-size class, and
 * the pipelining segment — decided the same way on every rank from the configuration and the
 * plan alone (never from this rank's own view), so all members of a group agree.
 *
 * `auto` follows what is known to work on each kind of link:
 * - bcast: inside a node the S0 engine (`shm`, unless `shm.bcast.enabled` is off, then
 *   binomial); between nodes binomial, and for large messages in groups of 4 or more
 *   scatter-allgather (van de Geijn: each link carries ~2m instead of m·log p).
 * - reduce: inside a node binomial (the shared-memory reduce, where every core combines a
 *   slice, is a choice: it did not beat the trees in bench/history/RESULTS-log-to-2026-11-24.md); between nodes
 *   binomial, and Rabenseifner's reduce-scatter + gather for large messages in groups of 4 or more.
 * - allreduce: reduce-allreduce-bcast (S3 §5.1), recursive doubling among the top group for
 *   small messages and Rabenseifner (reduce-scatter + allgather) for large ones.
 * - segment: none for small messages or a plan of one level; for large messages 64 KiB, which
 *   keeps every level busy while a segment still costs little per call (and which exchanges —
 *   both sides send before they receive — need to fit the transports' buffers).
 */

export type SizeClass = 'small' | 'large';

export interface ClassChoice {
  bcast: (g: Group) => BcastAlgorithm;
  /** Each group's barrier (the same in both size classes: a barrier carries no data). */
  barrier: (g: Group) => GroupBarrierAlgorithm;
  allgather: (g: Group) => GroupAllgatherAlgorithm;
  reduce: (g: Group) => ReduceAlgorithm;
  allreduce: { variant: AllreduceVariant; top: AllreduceAlgorithm };
  /**
   * Bytes per segment of each collective; 0: the whole message at once. Allgather: its gather
   * phase's column segments (of every rank's block), and its bcast phase's segments.
   */
  segmentBytes: { bcast: number; reduce: number; allreduce: number; allgather: number; allgatherBcast: number };
}

/** Longest segment of a large message when the configuration says `auto`. */
export const AUTO_SEGMENT_BYTES = 64 * 1024;

/** Whether every member of `g` runs on one node. */
export function isNodeLocal(plan: GroupPlan, g: Group): boolean {
  const node = plan.placements[g.members[0]!]!.node;
  return g.members.every((m) => plan.placements[m]!.node === node);
}

/**
 * The algorithms and segments of one size class. `eagerBytes`: the largest segment every
 * transport of the job buffers whole (exchanges between nodes send before they receive;
 * Infinity for a job on one node).
 */
export function chooseForClass(config: TopocollConfig, plan: GroupPlan, size: SizeClass, eagerBytes: number): ClassChoice {
  const large = size === 'large';
  const local = new Map<Group, boolean>();
  const nodeLocal = (g: Group): boolean => {
    let v = local.get(g);
    if (v === undefined) local.set(g, (v = isNodeLocal(plan, g)));
    return v;
  };
  // `shm` needs a group of one node: say which level and group, not a hang or a native error.
  const others: Record<'bcast' | 'reduce' | 'allgather', string> = {
    bcast: 'binomial, knomial:K, scatter-allgather, flat',
    reduce: 'binomial, knomial:K, rabenseifner, flat',
    allgather: 'ring, recursive-doubling, bruck, neighbor-exchange',
  };
  const checked = <A extends GroupAlgorithm>(collective: 'bcast' | 'reduce' | 'allgather', g: Group, a: A): A => {
    if (a === 'shm' && !nodeLocal(g)) {
      throw new TopocollError('ECONFIG', `${collective}.levels.${g.level}: shm works only inside a node, and the ${g.level} group ${g.unit} spans nodes`, {
        level: g.level,
        hint: `Give ${g.level} another algorithm (${others[collective]}).`,
      });
    }
    return a;
  };
  const bcast = (g: Group): BcastAlgorithm => {
    const configured = config.bcast.levels[g.level];
    if (configured !== undefined && configured !== 'auto') return checked('bcast', g, parseAlgorithm(configured, 'bcast'));
    if (nodeLocal(g)) return config.shm.bcast.enabled ? 'shm' : 'binomial';
    return large && g.members.length >= 4 ? 'scatter-allgather' : 'binomial';
  };
  const reduce = (g: Group): ReduceAlgorithm => {
    const configured = config.reduce.levels[g.level];
    if (configured !== undefined && configured !== 'auto') return checked('reduce', g, parseAlgorithm(configured, 'reduce'));
    // Binomial trees over the channels by default; the shared-memory reduce stays a choice
    // (bench/history/RESULTS-log-to-2026-11-24.md).
    if (nodeLocal(g)) return 'binomial';
    return large && g.members.length >= 4 ? 'rabenseifner' : 'binomial';
  };
  // Recursive doubling needs the fewest rounds (small messages are latency); the ring moves each
  // block over one link at a time (large ones are bandwidth). The shared-memory allgather (`shm`)
  // stays a choice: it beat neither consistently (bench/history/RESULTS-log-to-2026-11-24.md). One-node jobs take the
  // node-wide shared area instead (CollectivePlans.allgather).
  const allgather = (g: Group): GroupAllgatherAlgorithm => {
    const configured = config.allgather.levels[g.level];
    if (configured !== undefined && configured !== 'auto') return checked('allgather', g, parseAlgorithm(configured, 'allgather'));
    return large ? 'ring' : 'recursive-doubling';
  };
  // S4's AdaptiveBarrierLogP: the model's argmin for the group's size over its kind of link.
  const barrier = (g: Group): GroupBarrierAlgorithm => {
    const configured = config.barrier.levels[g.level];
    if (configured !== undefined && configured !== 'auto') return parseAlgorithm(configured, 'barrier');
    return chooseBarrier(g.members.length, nodeLocal(g) ? config.model.links.shm : config.model.links.tcp).algorithm;
  };
  const variant: AllreduceVariant = config.allreduce.algorithm === 'auto' ? 'reduce-allreduce-bcast' : config.allreduce.algorithm;
  const top: AllreduceAlgorithm = config.allreduce.top === 'auto' ? (large ? 'rabenseifner' : 'recursive-doubling') : config.allreduce.top;

  const groups = [...plan.groups.values()].flat();
  const bcastExchanges = groups.some((g) => bcast(g) === 'scatter-allgather');
  const reduceExchanges = groups.some((g) => reduce(g) === 'rabenseifner');
  const topExchanges = variant === 'reduce-allreduce-bcast' && (topGroup(plan)?.members.length ?? 0) > 1;
  const segment = (value: number | 'auto', exchanges: boolean): number => {
    const wanted = value === 'auto' ? (large && plan.levels.length > 1 ? AUTO_SEGMENT_BYTES : 0) : value;
    if (!exchanges || !Number.isFinite(eagerBytes)) return wanted;
    return wanted === 0 ? eagerBytes : Math.min(wanted, eagerBytes);
  };
  // Every step of an allgather's gather phase may be an exchange between nodes (not in shm
  // groups). Every group's choice is made here, so a misplaced shm is refused before any call.
  const allgathers = groups.map((g) => allgather(g));
  const allgatherExchanges = groups.some((g, i) => g.members.length > 1 && allgathers[i] !== 'shm');
  return {
    bcast,
    barrier,
    allgather,
    reduce,
    allreduce: { variant, top },
    segmentBytes: {
      bcast: segment(config.bcast.segment, bcastExchanges),
      reduce: segment(config.reduce.segment, reduceExchanges),
      allreduce: segment(config.allreduce.segment, bcastExchanges || reduceExchanges || topExchanges),
      allgather: segment(config.allgather.segment, allgatherExchanges),
      allgatherBcast: segment(config.bcast.segment, bcastExchanges),
    },
  };
}

/** Most ranks for which `allreduce.shm: true` has every rank combine: each reads every deposit. */
export const EVERY_RANK_COMBINES_MAX_RANKS = 8;

/**
 * The one-node shared allreduce's protocol for `allreduce.shm`: every rank combining costs one
 * cache-line transfer from each peer, all at once, but each rank must run to combine — with more
 * ranks than cores each such wait is a context switch, and the last to arrive combining for all
 * is cheaper (native/src/shm_allreduce.h).
 */
export function shmAllreduceProtocol(
  setting: boolean | 'every-rank' | 'last-arrival',
  ranks: number,
  oversubscribed: boolean,
): false | 'every-rank' | 'last-arrival' {
  if (setting !== true) return setting;
  return !oversubscribed && ranks <= EVERY_RANK_COMBINES_MAX_RANKS ? 'every-rank' : 'last-arrival';
}
