import { cpus as osCpus } from 'node:os';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import { NativeEngine, NativeMessages, WaitMode, type NativeP2PLayer } from '../native.js';
import { parseIndexList } from '../topology/index-list.js';
import type { NetworkTopology, NodeNetworkPath } from '../topology/network/types.js';
import type { RankPlacement } from '../topology/types.js';
import { coRunnersOf, machineOversubscribed, onMachineOf } from './co-runners.js';
import { JobPlanner, type JobPlans, type RemoteDirectory } from './job-planner.js';
import { windowThresholds } from './router.js';
import { segmentName } from './segment-name.js';
import { shmLayout } from './shm-budget.js';

/** @internal what init() hands the communicator */
export interface CommunicatorParts {
  engine: NativeEngine;
  /** Builds plans, links and shared-memory groups; again at every reconfiguration. */
  planner: JobPlanner;
  plans: JobPlans;
  config: TopocollConfig;
  node: string;
  localRank: number;
  localSize: number;
  /** The global ranks of this node, ascending (local rank i is localRanks[i]). */
  localRanks: readonly number[];
  /** More ranks on this node than cores. */
  oversubscribed: boolean;
  /** Groups registered with the shared-memory engines, with their ids. */
  shmGroups: ReadonlyMap<Group, number>;
  /** The OS index of the NUMA node this rank runs on, when it is bound inside one. */
  numaNode?: number;
  /** What the communicator was joined from (its sub-communicators are made from it). */
  origin: JoinOrigin;
  /** This rank's message streams, listening on the port its RankInfo carries, and the token their hellos carry (undefined: none). */
  messages?: { native: NativeMessages; token: string };
}

/** What every rank tells every other when it joins a job (init: over the rendezvous; createCommunicator: over the host layer). */
export interface RankInfo {
  node: string;
  host: string;
  /** The kernel the rank runs on (co-runners.ts, kernelId): ranks on one kernel share its CPUs. */
  kernel?: string;
  locality: string;
  /** The CPUs the process may run on, as an index list ("0-3,8"). */
  cpus: string;
  /**
   * How many CPUs the rank's machine has (os.cpus()): every rank prices the groups of other nodes
   * with their own machine's figure (co-runners.ts, nodeFactsOf).
   */
  machineCpus?: number;
  /**
   * init only: the IPv4 address of this rank's end of its rendezvous connection (the interface
   * that routes to the rendezvous), and the address it reached the rendezvous at (init.ts, linkAddress).
   */
  address?: string;
  rendezvousAddress?: string;
  slurmPath?: NodeNetworkPath;
  /** The port of the rank's point-to-point message streams (native/src/messages/message_streams.h). */
  messagesPort?: number;
}

/**
 * How the ranks of a communicator reach the ranks of other nodes after its setup, which is what
 * its sub-communicators (split, dup) link through: their own TCP links, or the same host layer
 * on tags of their own.
 */
export type LinkOrigin =
  | { readonly kind: 'tcp' }
  | {
      readonly kind: 'p2p';
      readonly layer: NativeP2PLayer;
      /** The layer's rank of each rank of the communicator (undefined: the same numbers). */
      readonly layerRanks?: readonly number[];
      /** How many sub-communicators this rank made over the layer (shared by every communicator over it). */
      readonly subCommunicators: { made: number };
      /** Why blocking calls are refused across nodes (a JavaScript layer), if they are. */
      readonly refuseBlocking?: string;
      /**
       * A JavaScript layer's bridge (js-layer.ts): close() calls it with the setup's time limit
       * once the engine is closed, to hand the layer the sends still queued and keep the process
       * alive until they settle.
       */
      readonly finishSends?: (timeoutMs: number) => void;
    };

/** What a communicator was joined from: its sub-communicators are planned and linked from it. */
export interface JoinOrigin {
  readonly infos: readonly RankInfo[];
  readonly network: NetworkTopology | undefined;
  /** The setup's time limit (timeouts.initMs, or the launcher's). */
  readonly timeoutMs: number;
  readonly links: LinkOrigin;
  /** The job's segment token (segment-name.ts): shared windows are named under it, so whatever sweeps the job's segments sweeps them too. */
  readonly segmentToken: string;
}

/** How a job's ranks reach each other while they join: what init and createCommunicator each provide. */
export interface JoinChannel {
  /** Part of the node segments' names (segment-name.ts): the same on every rank of the job, unpredictable. */
  readonly segmentToken: string;
  readonly timeoutMs: number;
  /** How the ranks reach each other once joined (kept for sub-communicators). */
  readonly links: LinkOrigin;
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
  const joining = startJoin(rank, infos, config);
  const { engine, localRanks, nodes, nodeIndex } = joining;
  try {
    await mapSegment(engine, rank, nodes[nodeIndex]!, nodeIndex, localRanks, channel);
    const remote = nodes.length > 1 ? await channel.linkNodes(engine, nodes, localRanks) : undefined;
    const origin: JoinOrigin = { infos, network, timeoutMs: channel.timeoutMs, links: channel.links, segmentToken: channel.segmentToken };
    return await finishJoin(joining, config, numaNode, remote, origin, () => channel.between());
  } catch (e) {
    engine.close();
    throw e;
  }
}

/** A rank's engine, made, and where the rank sits: the first step of joining. */
export interface Joining {
  readonly rank: number;
  readonly engine: NativeEngine;
  readonly placements: readonly RankPlacement[];
  /** The ranks of this rank's node, ascending; the first is the node leader. */
  readonly localRanks: readonly number[];
  /** Every node of the job, in order of their first rank; `nodeIndex` is this rank's. */
  readonly nodes: readonly string[];
  readonly nodeIndex: number;
  readonly oversubscribed: boolean;
}

/** Makes this rank's engine, sized for its node's ranks (nothing is mapped or linked yet). */
export function startJoin(rank: number, infos: readonly RankInfo[], config: TopocollConfig): Joining {
  const size = infos.length;
  const node = infos[rank]!.node;
  const placements: RankPlacement[] = infos.map((info, r) => ({ rank: r, node: info.node, locality: info.locality }));
  const localRanks = placements.filter((p) => p.node === node).map((p) => p.rank);
  const layout = shmLayout(config, localRanks.length, osCpus().length);
  // Emulated nodes and hosts share one machine: what matters is how many ranks share its cores.
  const oversubscribed = machineOversubscribed(rank, infos, osCpus().length);
  const engine = new NativeEngine({
    rank,
    size,
    localRanks,
    channelBytes: layout.channelBytes,
    channelMinBytes: layout.channelMinBytes,
    channelPoolBytes: layout.channelPoolBytes,
    oversubscribed,
    waits: WaitMode[config.waits.mode],
    remoteSpinUs: config.waits.remoteSpinUs,
    machineRanks: onMachineOf(rank, infos).length,
    windowBcastMinBytes: windowThresholds(config.routing, oversubscribed).bcast,
    coRunners: coRunnersOf(rank, new Map(localRanks.map((r) => [r, parseIndexList(infos[r]!.cpus)]))),
    bcast: layout.bcast,
    asymmetricFences: config.shm.membarrier,
    collectiveTimeoutMs: config.timeouts.collectiveMs,
    schedulerSliceUs: config.scheduler.sliceUs,
  });
  const nodes = [...new Set(infos.map((i) => i.node))];
  return { rank, engine, placements, localRanks, nodes, nodeIndex: nodes.indexOf(node), oversubscribed };
}

/**
 * The last step of joining, once the node's segment is mapped and the ranks of other nodes are
 * reachable: plans, links, shared-memory groups, and the engine started. The caller closes the
 * engine if this throws.
 */
export async function finishJoin(
  joining: Joining,
  config: TopocollConfig,
  numaNode: number | undefined,
  remote: RemoteDirectory | undefined,
  origin: JoinOrigin,
  between: () => Promise<void>,
): Promise<CommunicatorParts> {
  const { rank, engine, placements, localRanks } = joining;
  const planner = new JobPlanner(rank, placements, origin.network, engine, remote);
  const plans = planner.build(config);
  warnIfUnbound(plans.plan, rank, origin.infos[rank]!.locality);
  await planner.connectWatching(plans.linkPlans, between);
  const shmGroups = planner.registerShm(plans.plan);
  engine.start();
  const node = joining.nodes[joining.nodeIndex]!;
  return {
    engine,
    planner,
    plans,
    config,
    node,
    localRank: localRanks.indexOf(rank),
    localSize: localRanks.length,
    localRanks,
    oversubscribed: joining.oversubscribed,
    shmGroups,
    numaNode,
    origin,
  };
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
  await awaitSegmentMapped(engine, rank, node, channel.timeoutMs, () => channel.between());
}

/**
 * The node leader waits until every rank of its node mapped the segment it created, then the
 * name is unlinked. In short native waits, so that a failure elsewhere in the job (a rank of
 * this node that died before mapping) ends the wait as soon as `between` reports it. `context`
 * prefixes the timeout's message.
 */
export async function awaitSegmentMapped(
  engine: NativeEngine,
  rank: number,
  node: string,
  timeoutMs: number,
  between: () => Promise<void>,
  context = '',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!engine.allMappedAndUnlink(5)) {
    if (Date.now() > deadline) {
      throw new TopocollError('ETIMEDOUT', `${context}not every rank of node ${node} mapped the shared segment within ${timeoutMs} ms`, { rank, node });
    }
    await between();
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

/**
 * The address rank `rank` listens on for TCP links and the others connect to: on one machine
 * (emulated nodes) loopback; else the address it reaches the rendezvous from. A rank that
 * reaches it over loopback runs on the rendezvous's machine (MASTER_ADDR given as a name that
 * resolves to 127.0.1.1 there, as Debian's /etc/hosts does): it uses the address the ranks of
 * other machines reached the rendezvous at.
 */
export function linkAddress(infos: readonly RankInfo[], rank: number): string {
  if (infos.every((i) => i.host === infos[0]!.host)) return '127.0.0.1';
  const own = infos[rank]!.address ?? '127.0.0.1';
  if (!own.startsWith('127.')) return own;
  return infos.find((i) => i.address !== undefined && !i.address.startsWith('127.'))?.rendezvousAddress ?? own;
}

/**
 * This rank's message streams, bound to a port before the ranks exchange their information (the
 * port travels in RankInfo.messagesPort); the caller makes them listen once joined, before the
 * join's last barrier, and the Communicator starts them. Closed by the caller if the join fails.
 */
export function bindForMessages(rank: number, size: number, config: TopocollConfig): { native: NativeMessages; port: number } {
  const native = new NativeMessages(rank, size, config.timeouts.collectiveMs, messageDriveUs(config.waits));
  return { native, port: native.bind() };
}

/** The collectives' waits spin, then yield for about this long before they sleep (native/src/base/wait.h, WaitPolicy.yield_for). */
const SPIN_DRIVE_US = 200;

/**
 * How long a blocking message wait reads its streams itself before it sleeps (message_streams.h,
 * Wait), by the waits policy: spin as long as a collective's wait spins and yields, auto as long
 * as it spins on a TCP peer, sleep not at all.
 */
function messageDriveUs(waits: TopocollConfig['waits']): number {
  if (waits.mode === 'sleep') return 0;
  return waits.mode === 'auto' ? waits.remoteSpinUs : SPIN_DRIVE_US;
}
