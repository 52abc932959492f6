import { cpus as osCpus } from 'node:os';
import type { CommunicatorParts } from '../communicator.js';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import type { GroupPlan } from '../groups/plan.js';
import { NativeEngine } from '../native.js';
import { parseIndexList } from '../topology/index-list.js';
import type { NetworkTopology, NodeNetworkPath } from '../topology/network/types.js';
import type { RankPlacement } from '../topology/types.js';
import { coRunnersOf } from './co-runners.js';
import { JobPlanner, type RemoteDirectory } from './job-planner.js';
import { segmentName } from './segment-name.js';
import { shmLayout } from './shm-budget.js';

/** What every rank tells every other when it joins a job (init: over the rendezvous; createCommunicator: over the host layer). */
export interface RankInfo {
  node: string;
  host: string;
  locality: string;
  /** The CPUs the process may run on, as an index list ("0-3,8"). */
  cpus: string;
  /**
   * init only: the IPv4 address of this rank's end of its rendezvous connection (the interface
   * that routes to the rendezvous), and the address it reached the rendezvous at (init.ts, linkAddress).
   */
  address?: string;
  rendezvousAddress?: string;
  slurmPath?: NodeNetworkPath;
}

/** How a job's ranks reach each other while they join: what init and createCommunicator each provide. */
export interface JoinChannel {
  /** Part of the node segments' names (segment-name.ts): the same on every rank of the job, unpredictable. */
  readonly segmentToken: string;
  readonly timeoutMs: number;
  /** The node leader tells the other ranks of its node the segment's name. */
  publishSegment(nodeIndex: number, name: string, localRanks: readonly number[]): Promise<void>;
  /** A rank learns its node's segment name from the leader. */
  segmentOf(nodeIndex: number, leader: number): Promise<string>;
  /** With the segment mapped: how this rank reaches the ranks of other nodes (undefined: one node). */
  linkNodes(engine: NativeEngine, nodes: readonly string[], localRanks: readonly number[]): Promise<RemoteDirectory | undefined>;
  /** Runs between short native waits: yields to the event loop, throws once the job's setup failed elsewhere. */
  between(): Promise<void>;
}

/**
 * The part of joining a job that follows the exchange of rank information, the same for every
 * way of starting: the engine, the node's segment, the links to other nodes, the plans and the
 * shared-memory groups. Returns what the Communicator is made of once the ranks agreed they are
 * all ready (the caller's last barrier). The engine is closed if anything fails.
 */
export async function joinJob(
  rank: number,
  infos: readonly RankInfo[],
  config: TopocollConfig,
  network: NetworkTopology | undefined,
  numaNode: number | undefined,
  channel: JoinChannel,
): Promise<CommunicatorParts> {
  const size = infos.length;
  const node = infos[rank]!.node;
  const placements: RankPlacement[] = infos.map((info, r) => ({ rank: r, node: info.node, locality: info.locality }));
  const localRanks = placements.filter((p) => p.node === node).map((p) => p.rank);
  const localRank = localRanks.indexOf(rank);
  const layout = shmLayout(config, localRanks.length, osCpus().length);
  // Emulated nodes share one machine: what matters is how many ranks share its cores.
  const oversubscribed = infos.filter((i) => i.host === infos[rank]!.host).length > osCpus().length;
  const engine = new NativeEngine({
    rank,
    size,
    localRanks,
    channelBytes: layout.channelBytes,
    oversubscribed,
    coRunners: coRunnersOf(rank, new Map(localRanks.map((r) => [r, parseIndexList(infos[r]!.cpus)]))),
    bcast: layout.bcast,
    asymmetricFences: config.shm.membarrier,
    collectiveTimeoutMs: config.timeouts.collectiveMs,
    schedulerSliceUs: config.scheduler.sliceUs,
  });
  try {
    const nodes = [...new Set(infos.map((i) => i.node))];
    await mapSegment(engine, rank, node, nodes.indexOf(node), localRanks, channel);
    const remote = nodes.length > 1 ? await channel.linkNodes(engine, nodes, localRanks) : undefined;
    const planner = new JobPlanner(rank, placements, network, engine, remote);
    const plans = planner.build(config);
    warnIfUnbound(plans.plan, rank, infos[rank]!.locality);
    await planner.connectWatching([plans.plan, plans.orderedPlan], () => channel.between());
    const shmGroups = planner.registerShm(plans.plan);
    engine.start();
    return { engine, planner, plans, config, node, localRank, localSize: localRanks.length, oversubscribed, shmGroups, numaNode };
  } catch (e) {
    engine.close();
    throw e;
  }
}

/** The node leader creates the node's segment and waits until every local rank mapped it; the others map it. */
async function mapSegment(
  engine: NativeEngine,
  rank: number,
  node: string,
  nodeIndex: number,
  localRanks: readonly number[],
  channel: JoinChannel,
): Promise<void> {
  if (localRanks.length < 2) return;
  if (localRanks[0] !== rank) {
    engine.openSegment(await channel.segmentOf(nodeIndex, localRanks[0]!));
    return;
  }
  const name = segmentName(channel.segmentToken, nodeIndex);
  engine.createSegment(name);
  await channel.publishSegment(nodeIndex, name, localRanks);
  // In short native waits, so that a failure elsewhere in the job (a rank of this node that died
  // before mapping) ends this wait as soon as the channel reports it.
  const deadline = Date.now() + channel.timeoutMs;
  while (!engine.allMappedAndUnlink(5)) {
    if (Date.now() > deadline) {
      throw new TopocollError('ETIMEDOUT', `not every rank of node ${node} mapped the shared segment within ${channel.timeoutMs} ms`, { rank, node });
    }
    await channel.between();
  }
}

/** Unbound processes cannot be placed below the node; say so once, with the fix. */
function warnIfUnbound(plan: GroupPlan, rank: number, locality: string): void {
  const node = plan.placements[rank]!.node;
  // Alone on its node a rank has no group below the node anyway.
  if (plan.placements.filter((p) => p.node === node).length < 2) return;
  const spans = plan.dropped.find((d) => d.node === node && (d.cause === 'spans' || d.cause === 'unknown') && d.rank === rank);
  if (spans !== undefined && rank === plan.placements.find((p) => p.node === node)!.rank) {
    process.emitWarning(
      `topocoll: processes on ${node} are not bound to cores (${spans.reason}; locality ${locality || 'unknown'}), so only the node level and above are used. Bind them: topocoll run --bind core, mpirun --bind-to core, or srun --cpu-bind=cores.`,
    );
  }
}
