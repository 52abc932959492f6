import { cpus as osCpus } from 'node:os';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import { allLevelNames } from '../groups/levels.js';
import { planGroups, type Group, type GroupPlan } from '../groups/plan.js';
import type { ExchangeLimits } from '../algorithms/selection.js';
import type { RankPlacement } from '../topology/types.js';
import { nativeLimits, type NativeEngine, type TcpPeerAddress } from '../native.js';
import type { NetworkTopology } from '../topology/network/types.js';
import { rankOrderedPlan } from './collective-plans.js';
import { shmLayout } from './shm-budget.js';

/** Everything the schedules of one configuration are built from. */
export interface JobPlans {
  plan: GroupPlan;
  /** Where non-commutative reductions run (`rankOrderedPlan`). */
  orderedPlan: GroupPlan;
  /** Carried by every message: ranks planned differently are caught (EMISMATCH). */
  hash: number;
  /** Largest segments of exchanges between nodes. */
  exchangeLimits: ExchangeLimits;
  /**
   * The plans whose groups this rank needs links in (JobPlanner.connect): `plan` and
   * `orderedPlan`, and with bcast.algorithm `one-sided` the world as one group — S1's tree and
   * its done counts join any two ranks of different nodes.
   */
  linkPlans: GroupPlan[];
}

/** How a rank reaches the others over TCP: what init learned (hosts, listening ports, token). */
export interface TcpDirectory {
  token: string;
  /** Every rank's address; `port` 0 when the rank does not listen. */
  addresses: TcpPeerAddress[];
  timeoutMs: number;
}

/** How a rank reaches the ranks of other nodes: its own TCP links, or a host layer's messages (createCommunicator). */
export type RemoteDirectory = TcpDirectory | { readonly p2p: true };

/**
 * The plans of one job for a configuration, and the links and shared-memory groups they need:
 * used by init and again by every runtime reconfiguration, so both build the same way.
 */
export class JobPlanner {
  constructor(
    readonly rank: number,
    readonly placements: readonly RankPlacement[],
    readonly network: NetworkTopology | undefined,
    private readonly engine: NativeEngine,
    private readonly remote?: RemoteDirectory,
  ) {}

  private get tcp(): TcpDirectory | undefined {
    return this.remote !== undefined && 'addresses' in this.remote ? this.remote : undefined;
  }

  /** The plans for `config` (pure: nothing is sent or registered). */
  build(config: TopocollConfig): JobPlans {
    const disabled = Object.entries(config.levels)
      .filter(([, s]) => !s.enabled)
      .map(([name]) => name);
    const options = { network: this.network, disabled };
    const plan = planGroups(this.placements, options);
    const orderedPlan = rankOrderedPlan(plan, this.placements, options);
    const linkPlans = [plan, orderedPlan];
    if (config.bcast.algorithm === 'one-sided') {
      const world = allLevelNames(this.network?.levels ?? 0).filter((l) => l !== 'world');
      linkPlans.push(planGroups(this.placements, { network: this.network, disabled: world }));
    }
    return {
      plan,
      orderedPlan,
      hash: planHash(plan, config),
      exchangeLimits: exchangeLimits(config, plan, this.tcp !== undefined ? 'tcp' : 'layer'),
      linkPlans,
    };
  }

  /** The plan of `config` with every level on (to list the levels that are off). */
  buildAllLevels(): GroupPlan {
    return planGroups(this.placements, { network: this.network, disabled: [] });
  }

  /**
   * TCP links to the ranks of other nodes this rank shares a group with in any of `plans` and
   * has no link to yet. Both ends of every new link must call this at about the same time
   * (init, or a collective reconfiguration): the lower rank accepts, the higher connects. The
   * native wait blocks this thread (the peers it waits for run in other processes) up to the
   * link timeout; ETIMEDOUT names the ranks that never linked.
   */
  connect(plans: GroupPlan[]): void {
    const peers = this.unlinkedPeers(plans);
    if (peers.length > 0) this.link(peers, this.tcp!.timeoutMs, Date.now() + this.tcp!.timeoutMs);
  }

  /** Over a host layer nothing is connected: the layer's peers are only named (for abort notices). */
  private nameLayerPeers(plans: GroupPlan[]): boolean {
    if (this.remote === undefined || 'addresses' in this.remote) return false;
    const ranks = this.remotePeers(plans);
    if (ranks.length > 0) this.engine.addP2PPeers(ranks);
    for (const r of ranks) this.linked.add(r);
    return true;
  }

  /**
   * connect() for init: waits in short native slices and runs `between` (which yields to the
   * event loop and throws when the job's init was aborted) between them, so a rank that fails
   * elsewhere stops this wait at once.
   */
  async connectWatching(plans: GroupPlan[], between: () => Promise<void>): Promise<void> {
    const peers = this.unlinkedPeers(plans);
    const deadline = Date.now() + (this.tcp?.timeoutMs ?? 0);
    while (peers.length > 0 && !this.link(peers, 20, deadline)) await between();
  }

  private remotePeers(plans: GroupPlan[]): number[] {
    const node = this.placements[this.rank]!.node;
    const remote = new Set<number>();
    for (const plan of plans) {
      for (const group of plan.chain(this.rank)) {
        for (const m of group.members) if (this.placements[m]!.node !== node && !this.linked.has(m)) remote.add(m);
      }
    }
    return [...remote].sort((a, b) => a - b);
  }

  private unlinkedPeers(plans: GroupPlan[]): TcpPeerAddress[] {
    if (this.nameLayerPeers(plans)) return [];
    const ranks = this.remotePeers(plans);
    if (ranks.length === 0) return [];
    if (this.tcp === undefined)
      throw new TopocollError('EINVAL', `rank ${this.rank} needs links to other nodes, but the job was started without them (no rendezvous)`, {
        rank: this.rank,
      });
    return ranks.map((rank) => this.tcp!.addresses[rank]!);
  }

  /** One native wait of at most `waitMs`; true once every peer is linked, ETIMEDOUT past `deadline`. */
  private link(peers: TcpPeerAddress[], waitMs: number, deadline: number): boolean {
    const { missing, lastError } = this.engine.connectTcp(this.tcp!.token, peers, waitMs);
    for (const p of peers) if (!missing.includes(p.rank)) this.linked.add(p.rank);
    if (missing.length === 0) return true;
    if (Date.now() < deadline) return false;
    const lower = [...missing].filter((r) => r < this.rank);
    throw new TopocollError(
      'ETIMEDOUT',
      `no TCP link to rank(s) ${[...missing].join(', ')} within ${this.tcp!.timeoutMs} ms${lower.length > 0 && lastError ? ` (${lastError})` : ''}`,
      {
        rank: this.rank,
        hint: 'Check that the ranks can reach each other at the addresses they reach the rendezvous from (firewalls, several interfaces).',
      },
    );
  }

  /**
   * Registers every group of this rank's chain whose members all share its node with the
   * shared-memory engines (bcast and reduce). Its id is its level's index in the plan: the
   * same on every member (the engine keys each member's control ring by it), and unique per
   * rank (one group per level).
   */
  registerShm(plan: GroupPlan): Map<Group, number> {
    const node = this.placements[this.rank]!.node;
    const groups = new Map<Group, number>();
    if (this.placements.filter((p) => p.node === node).length < 2) return groups;
    for (const g of plan.chain(this.rank)) {
      if (g.members.every((m) => this.placements[m]!.node === node)) {
        const id = plan.levels.indexOf(g.level);
        this.engine.setShmGroup(id, g.members);
        groups.set(g, id);
      }
    }
    return groups;
  }

  private readonly linked = new Set<number>();
}

/**
 * A plan's identity, carried by every message so differently configured ranks are caught: the
 * levels and everything that decides the schedules (algorithms, segments, shm on or off) or
 * which path a call takes where every rank must take the same one (`routing.windows`: single-copy
 * window algorithm or the levels; `routing.sharedArea`: the one-node area or the schedules;
 * `routing.scan`: the scan's segment). Left out: what is each rank's own and makes the same
 * calls either way (`collectives.jsFastPath`, `routing.fastPath`).
 */
export function planHash(plan: GroupPlan, config: TopocollConfig): number {
  // jsFastPath is each rank's own: both paths make the same calls.
  const { jsFastPath: _, ...collectives } = config.collectives;
  const text = JSON.stringify([
    plan.levels,
    config.bcast,
    config.reduce,
    config.allreduce,
    config.allgather,
    config.gather,
    config.scatter,
    config.reduceScatter,
    config.alltoall,
    config.barrier,
    collectives,
    config.shm.bcast.enabled,
    config.shm.model,
    config.model,
    config.routing.windows,
    config.routing.sharedArea,
    config.routing.scan,
  ]);
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * The largest segments exchanges between nodes may carry (ExchangeLimits), the same on every
 * rank: they follow from the configuration and the carrier alone. Inside a node there is no
 * limit: an exchange between two ranks of a node interleaves its send and its receive piece by
 * piece. Between two remote peers, none over TCP (the exchange writes while it reads); over a
 * host layer (`carrier` 'layer') its sends are copies posted without waiting for a reader, up to
 * `layerExchangeBytes`. An exchange that
 * pairs a local peer with a remote one sends before it receives on both sides, so its segment
 * must fit the smallest channel an outbox of any node may make (less two message headers) and
 * the eager limit.
 */
export function exchangeLimits(config: TopocollConfig, plan: GroupPlan, carrier: 'tcp' | 'layer'): ExchangeLimits {
  const perNode = new Map<string, number>();
  for (const p of plan.placements) perNode.set(p.node, (perNode.get(p.node) ?? 0) + 1);
  if (perNode.size <= 1) return { apart: Infinity, mixed: Infinity };
  const limits = nativeLimits();
  let mixed = limits.eagerBytes;
  // One layout per distinct node size (it computes the model's tables), not one per node.
  for (const size of new Set(perNode.values())) {
    if (size > 1) mixed = Math.min(mixed, shmLayout(config, size, osCpus().length).channelMinBytes - 2 * limits.messageHeaderBytes);
  }
  return { apart: carrier === 'tcp' ? Infinity : limits.layerExchangeBytes, mixed };
}
