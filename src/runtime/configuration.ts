import { preservesRankOrder } from '../algorithms/hierarchical.js';
import { CallTag, type CallContext, type CallState } from '../collectives/call-context.js';
import { mergeRuntimeConfig, type RuntimeConfigInput } from '../config/load.js';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import { NativeCollective } from '../native.js';
import { CollectivePlans } from './collective-plans.js';
import { datatypeOf, reduceOpCode } from './datatypes.js';
import type { JobPlanner, JobPlans } from './job-planner.js';
import { Router } from './router.js';
import type { Windows } from './windows.js';
import type { NodeFigures } from './co-runners.js';

/**
 * The control plane of a communicator's configuration: what it runs under one configuration
 * (the plans of its calls, the point-to-point control plans, the plans of bcasts on windows, the
 * router, the plan hash), and configure()'s protocol, which agrees on a new one and switches to
 * it on every rank at the same point of the call sequence.
 */

/** What stays the same through every configuration of a communicator. */
export interface ConfigurationParts {
  rank: number;
  size: number;
  /** More ranks on this node than cores. */
  oversubscribed: boolean;
  /** Cores of this node. */
  cores: number;
  /** Each rank's host and allowed CPUs, for the cost model's groups whose members share cores. */
  cpus: readonly { machine: string; cpus: readonly number[] }[];
  /** Every node's CPUs and oversubscription, known alike to every rank (co-runners.ts, nodeFactsOf). */
  nodes: ReadonlyMap<string, NodeFigures>;
  windows: Windows;
  /** The JavaScript fast path exists here (runtime/router.ts). */
  fastPathAvailable: boolean;
  /** Hands a schedule to the native engine; returns its id there (unique over every plan of the communicator). */
  register: (encoded: Int32Array) => number;
}

/** One configuration in force: the calls' state (CallState) and what the control plane keeps of it. */
export interface Configuration extends CallState {
  config: TopocollConfig;
  plan: GroupPlan;
  /** Point-to-point-only schedules of the same plan, for configure()'s own agreement and barriers. */
  control: CollectivePlans;
}

/** Everything a communicator runs under `config`, planned as `plans`, with the node's shared-memory groups `shmGroups`. */
export function configurationOf(parts: ConfigurationParts, plans: JobPlans, config: TopocollConfig, shmGroups: ReadonlyMap<Group, number>): Configuration {
  const collectivePlans = (cfg: TopocollConfig, ordered: GroupPlan, groups: ReadonlyMap<Group, number>): CollectivePlans =>
    new CollectivePlans({
      plan: plans.plan,
      orderedPlan: ordered,
      rank: parts.rank,
      config: cfg,
      shmGroups: groups,
      exchangeLimits: plans.exchangeLimits,
      oversubscribed: parts.oversubscribed,
      cores: parts.cores,
      cpus: parts.cpus,
      nodes: parts.nodes,
      register: parts.register,
    });
  const callPlans = collectivePlans(config, plans.orderedPlan, shmGroups);
  let windowPlans: CollectivePlans | undefined;
  return {
    config,
    plan: plans.plan,
    plans: callPlans,
    planHash: plans.hash,
    rankOrdered: preservesRankOrder(plans.orderedPlan),
    control: collectivePlans(controlConfig(config, plans.plan), plans.plan, new Map()),
    router: new Router({
      config,
      plans: callPlans,
      windows: parts.windows,
      fastPathAvailable: parts.fastPathAvailable,
      oversubscribed: parts.oversubscribed,
      size: parts.size,
    }),
    // Made on first use.
    windowBcastPlans: () => (windowPlans ??= collectivePlans(windowBcastConfig(config, plans.plan, shmGroups), plans.orderedPlan, shmGroups)),
  };
}

/** Binomial trees over channels and TCP only, reduce then bcast: never the shared-memory engines. */
function controlConfig(config: TopocollConfig, plan: GroupPlan): TopocollConfig {
  const binomial = Object.fromEntries(plan.levels.map((l) => [l, 'binomial']));
  return {
    ...config,
    bcast: { algorithm: 'levels', pollMicros: 0, levels: binomial, segment: 0, shm: false },
    reduce: { levels: binomial, segment: 0, shm: false },
    allreduce: { algorithm: 'reduce-bcast', top: 'recursive-doubling', segment: 0, shm: false },
  };
}

/**
 * The configuration of a bcast whose buffer is a shared window: every level whose groups are all
 * registered with the S0 engine (groups inside a node) runs the S0 bcast, whose window mode lets
 * readers copy straight out of the root's window (native/src/shm/shm_bcast.h); levels between
 * nodes keep their choice.
 */
function windowBcastConfig(config: TopocollConfig, plan: GroupPlan, shmGroups: ReadonlyMap<Group, number>): TopocollConfig {
  const levels: Record<string, string> = { ...config.bcast.levels };
  for (const [level, groups] of plan.groups) {
    if (groups.every((g) => g.members.length < 2 || shmGroups.has(g))) levels[level] = 'shm';
  }
  return { ...config, bcast: { ...config.bcast, levels } };
}

/**
 * An allreduce (max) over the control plans, tagged `tag` (CallTag): the control plane's
 * agreements, which a rank in any other collective does not take for its own.
 */
export function controlAllreduce(ctx: CallContext, control: CollectivePlans, send: Float64Array, recv: Float64Array, tag: number = CallTag.control): void {
  const type = datatypeOf(send, 'send');
  const p = control.allreduce(send.byteLength, type.bytes, true);
  const call = ctx.nativeCall(NativeCollective.allreduce, p, send, recv, send.length, type.code, reduceOpCode('max', type), 0);
  call.planHash = ctx.tagged(tag);
  call.segment = 0;
  ctx.engine.run(call);
}

/**
 * configure()'s protocol: the merged configuration is planned, every rank's plan hash compared
 * (ranks that differ all get EMISMATCH and keep the old configuration), links made for the new
 * plan, the shared-memory engines reset and the node's groups registered anew, then a second
 * agreement — after which no rank of the node still reads anything the engines held — and the
 * new configuration, returned, is in force. Both agreements use the control plans, never the
 * shared-memory engines.
 */
export function reconfigure(
  ctx: CallContext,
  current: Configuration,
  planner: JobPlanner,
  parts: ConfigurationParts,
  partial: RuntimeConfigInput,
): Configuration {
  const config = mergeRuntimeConfig(current.config, partial);
  const next = planner.build(config);
  const hashes = Float64Array.of(next.hash, -next.hash);
  const extremes = new Float64Array(2);
  controlAllreduce(ctx, current.control, hashes, extremes);
  if (extremes[0] !== -extremes[1]!) {
    throw new TopocollError(
      'EMISMATCH',
      `configure(): the ranks asked for different configurations (plan hashes ${-extremes[1]!} … ${extremes[0]!}); the old one stays in force`,
      { rank: ctx.rank },
    );
  }
  planner.connect(next.linkPlans);
  ctx.engine.resetShm();
  const shmGroups = planner.registerShm(next.plan);
  // Nobody may use the engines before every rank of the node has reset its part.
  controlAllreduce(ctx, current.control, hashes, extremes);
  const configuration = configurationOf(parts, next, config, shmGroups);
  ctx.install(configuration);
  return configuration;
}
