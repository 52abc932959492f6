import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { cpus as osCpus, hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Communicator } from '../communicator.js';
import { loadConfigFile, resolveConfig, validateConfig } from '../config/load.js';
import type { TopocollConfig, TopocollConfigInput } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import { planGroups, type Group, type GroupPlan, type RankPlacement } from '../groups/plan.js';
import { NativeEngine, nativeLimits } from '../native.js';
import { readProcessAffinity } from '../topology/affinity.js';
import { discoverMachine } from '../topology/discover.js';
import { formatLocality } from '../topology/locality-string.js';
import { networkFromSlurmAddresses } from '../topology/network/slurm-address.js';
import { resolveNetworkSource } from '../topology/network/network-source.js';
import type { NetworkTopology, NodeNetworkPath } from '../topology/network/types.js';
import { resolveNodeIdentity } from '../topology/node-identity.js';
import { computeLocality } from '../topology/process-locality.js';
import { detectEnvironment, type JobEnvironment } from './environment.js';
import { numaNodeOf } from './placement.js';
import { segmentName } from './segment-name.js';
import { shmLayout } from './shm-budget.js';
import { rankOrderedPlan } from './collective-plans.js';
import { allgather, barrier, createJobToken, RendezvousClient, RendezvousServer } from './rendezvous.js';

export interface InitOptions {
  /** A YAML file, or configuration given in code; default: TOPOCOLL_CONFIG, else the shipped defaults. */
  config?: string | TopocollConfigInput;
  /** Environment to detect the job from; default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** What every rank tells every other during init. */
interface RankInfo {
  node: string;
  host: string;
  locality: string;
  slurmPath?: NodeNetworkPath;
}

/**
 * Joins the job: finds the other processes through the rendezvous, exchanges node names and
 * locality strings, builds the same groups and plans on every rank, maps the node's shared
 * segment and connects to the ranks of other nodes it shares a group with.
 */
export async function init(options: InitOptions = {}): Promise<Communicator> {
  const env = options.env ?? process.env;
  const job = detectEnvironment(env);
  const config = configFor(options.config, job, env);
  const timeoutMs = job.timeoutMs ?? config.timeouts.initMs;
  const node = job.nodeName ?? resolveNodeIdentity(config.node.identity, env);
  const network = resolveNetworkSource(job.networkFile ? { source: 'file', file: job.networkFile } : config.network, env, node);
  const here = whereThisProcessRuns(config, env);
  const locality = config.topology.locality ?? env.TOPOCOLL_LOCALITY ?? here.locality;
  const me: RankInfo = { node, host: hostname(), locality, ...(network.kind === 'slurm' ? { slurmPath: network.path } : {}) };

  const rdv = await connectRendezvous(job, timeoutMs);
  try {
    const infos = rdv ? (await allgather(rdv.client, 'init/info', job.rank, job.size, JSON.stringify(me), timeoutMs)).map((s) => JSON.parse(s) as RankInfo) : [me];
    const placements: RankPlacement[] = infos.map((info, rank) => ({ rank, node: info.node, locality: info.locality }));
    const net: NetworkTopology | undefined =
      network.kind === 'file' ? network.network : network.kind === 'slurm' ? networkFromSlurmAddresses(infos.map((i) => i.slurmPath!)) : undefined;
    const disabled = Object.entries(config.levels).filter(([, s]) => !s.enabled).map(([name]) => name);
    const plan = planGroups(placements, { network: net, disabled });
    const orderedPlan = rankOrderedPlan(plan, placements, { network: net, disabled });
    warnIfUnbound(plan, job.rank, locality);

    const localRanks = placements.filter((p) => p.node === node).map((p) => p.rank);
    const localRank = localRanks.indexOf(job.rank);
    const layout = shmLayout(config, localRanks.length, osCpus().length);
    const engine = new NativeEngine({
      rank: job.rank,
      size: job.size,
      localRanks,
      channelBytes: layout.channelBytes,
      // Emulated nodes share one machine: what matters is how many ranks share its cores.
      oversubscribed: infos.filter((i) => i.host === me.host).length > osCpus().length,
      bcast: layout.bcast,
      asymmetricFences: config.shm.membarrier,
    });
    let shmGroups = new Map<Group, number>();
    try {
      if (rdv) await connectEngine(engine, rdv.client, rdv.token, job, [plan, orderedPlan], infos, localRanks, timeoutMs);
      if (config.shm.bcast.enabled) shmGroups = registerShmGroups(engine, plan, job.rank);
      engine.start();
      if (rdv) await barrier(rdv.client, 'init/ready', job.rank, job.size, timeoutMs);
    } catch (e) {
      engine.close();
      throw e;
    }
    const onClose = rdv ? releaseRendezvous(rdv, job) : undefined;
    return new Communicator({
      engine,
      plan,
      rank: job.rank,
      node,
      localRank,
      localSize: localRanks.length,
      planHash: planHash(plan, config),
      orderedPlan,
      config,
      eagerBytes: eagerBytes(config, plan),
      shmGroups,
      numaNode: here.numaNode,
      onClose,
    });
  } catch (e) {
    await rdv?.client.close().catch(() => undefined);
    await rdv?.server?.close().catch(() => undefined);
    throw e;
  }
}

function configFor(given: InitOptions['config'], job: JobEnvironment, env: NodeJS.ProcessEnv): TopocollConfig {
  if (given !== undefined && typeof given !== 'string') return validateConfig(given, 'init({ config })');
  if (typeof given === 'string') return loadConfigFile(given);
  if (job.configFile !== undefined) return loadConfigFile(job.configFile);
  return resolveConfig(undefined, env);
}

/** This process's locality string, and the NUMA node its memory should be on when it has one. */
function whereThisProcessRuns(config: TopocollConfig, env: NodeJS.ProcessEnv): { locality: string; numaNode?: number } {
  const machine = discoverMachine({ hwlocXml: config.topology.hwlocXml ?? undefined, env, source: config.topology.source });
  const cpus = readProcessAffinity();
  return { locality: formatLocality(computeLocality(machine, cpus).locality), numaNode: numaNodeOf(machine.objects.numa, cpus) };
}

/** Unbound processes cannot be placed below the node; say so once, with the fix. */
function warnIfUnbound(plan: GroupPlan, rank: number, locality: string): void {
  const node = plan.placements[rank]!.node;
  // Alone on its node a rank has no group below the node anyway.
  if (plan.placements.filter((p) => p.node === node).length < 2) return;
  const spans = plan.dropped.find((d) => d.node === node && (d.cause === 'spans' || d.cause === 'unknown') && d.rank === rank);
  if (spans !== undefined && rank === plan.placements.find((p) => p.node === node)!.rank) {
    process.emitWarning(`topocoll: processes on ${node} are not bound to cores (${spans.reason}; locality ${locality || 'unknown'}), so only the node level and above are used. Bind them: topocoll run --bind core, mpirun --bind-to core, or srun --cpu-bind=cores.`);
  }
}

interface Rendezvous {
  client: RendezvousClient;
  server?: RendezvousServer;
  token: string;
}

async function connectRendezvous(job: JobEnvironment, timeoutMs: number): Promise<Rendezvous | undefined> {
  const plan = job.rendezvous;
  if (plan.kind === 'none' || job.size === 1) return undefined;
  if (plan.kind === 'address') {
    const server = plan.hostedByRank0 && job.rank === 0 ? await RendezvousServer.listen({ token: plan.token, host: '0.0.0.0', port: plan.port }) : undefined;
    const client = await RendezvousClient.connect({ host: plan.host, port: plan.port, token: plan.token, rank: job.rank, timeoutMs });
    return { client, server, token: plan.token };
  }
  // One node, no address: rank 0 hosts on loopback and leaves port and token in a private file.
  const file = join(tmpdir(), `topocoll-${plan.jobKey.replace(/[^A-Za-z0-9_.-]/g, '_')}.rendezvous.json`);
  if (job.rank === 0) {
    const token = createJobToken();
    const server = await RendezvousServer.listen({ token });
    const tmp = `${file}.${process.pid}`;
    writeFileSync(tmp, JSON.stringify({ port: server.address.port, token }), { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, file);
    const client = await RendezvousClient.connect({ host: '127.0.0.1', port: server.address.port, token, rank: 0, timeoutMs });
    return { client, server, token };
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const { port, token } = JSON.parse(readFileSync(file, 'utf8')) as { port: number; token: string };
      const client = await RendezvousClient.connect({ host: '127.0.0.1', port, token, rank: job.rank, timeoutMs: Math.max(1, deadline - Date.now()) });
      return { client, token };
    } catch (e) {
      if (Date.now() > deadline) {
        throw new TopocollError('ETIMEDOUT', `rank 0 did not publish the rendezvous in ${file} within ${timeoutMs} ms`, {
          rank: job.rank,
          cause: e,
          hint: 'For jobs on several nodes set MASTER_ADDR and MASTER_PORT.',
        });
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Shared segment per node, then TCP links between nodes. */
async function connectEngine(
  engine: NativeEngine,
  client: RendezvousClient,
  token: string,
  job: JobEnvironment,
  plans: GroupPlan[],
  infos: RankInfo[],
  localRanks: number[],
  timeoutMs: number,
): Promise<void> {
  const node = infos[job.rank]!.node;
  const nodeIndex = [...new Set(infos.map((i) => i.node))].indexOf(node);
  if (localRanks.length > 1) {
    const name = segmentName(token, nodeIndex);
    const leader = localRanks[0] === job.rank;
    if (leader) {
      engine.createSegment(name);
      await client.put(`init/shm/${nodeIndex}`, name);
    } else {
      engine.openSegment(await client.get(`init/shm/${nodeIndex}`, timeoutMs));
    }
    if (leader) engine.waitAllMappedAndUnlink(name, timeoutMs);
  }

  // TCP only between ranks of different nodes that share a group (of any of the plans).
  const remote = new Set<number>();
  for (const plan of plans) {
    for (const group of plan.chain(job.rank)) {
      for (const m of group.members) if (infos[m]!.node !== node) remote.add(m);
    }
  }
  const port = remote.size > 0 ? engine.listenTcp() : 0;
  const ports = (await allgather(client, 'init/tcp', job.rank, job.size, String(port), timeoutMs)).map(Number);
  if (remote.size === 0) return;
  // All ranks on one machine (emulated nodes) talk over loopback.
  const oneHost = infos.every((i) => i.host === infos[0]!.host);
  const peers = [...remote].sort((a, b) => a - b).map((rank) => ({ rank, host: oneHost ? '127.0.0.1' : infos[rank]!.host, port: ports[rank]! }));
  // The native connect blocks this thread; the peers it waits for run in other processes.
  engine.connectTcp(token, peers, timeoutMs);
}

/**
 * Every group of this rank's chain whose members all share its node broadcasts through the S0
 * engine. Its id is its level's index in the plan: the same on every member (the engine keys
 * each member's control ring by it), and unique per rank (one group per level).
 */
function registerShmGroups(engine: NativeEngine, plan: GroupPlan, rank: number): Map<Group, number> {
  const node = plan.placements[rank]!.node;
  const groups = new Map<Group, number>();
  for (const g of plan.chain(rank)) {
    if (g.members.every((m) => plan.placements[m]!.node === node)) {
      const id = plan.levels.indexOf(g.level);
      engine.setShmGroup(id, g.members);
      groups.set(g, id);
    }
  }
  return groups;
}

/**
 * A plan's identity, carried by every message so differently configured ranks are caught: the
 * levels and everything that decides the schedules (algorithms, segments, shm on or off).
 */
export function planHash(plan: GroupPlan, config: TopocollConfig): number {
  const text = JSON.stringify([plan.levels, config.bcast, config.reduce, config.allreduce, config.collectives, config.shm.bcast.enabled]);
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * The largest segment an exchange may carry on every link of the job: both sides send before
 * they receive, so it must fit the smallest shared-memory channel of any node (less two
 * message headers) and the native TCP limit. The same on every rank: channel sizes follow from
 * the configuration and each node's rank count, which every rank knows.
 */
export function eagerBytes(config: TopocollConfig, plan: GroupPlan): number {
  const perNode = new Map<string, number>();
  for (const p of plan.placements) perNode.set(p.node, (perNode.get(p.node) ?? 0) + 1);
  const limits = nativeLimits();
  let bytes = limits.eagerBytes;
  for (const size of perNode.values()) {
    if (size > 1) bytes = Math.min(bytes, shmLayout(config, size, osCpus().length).channelBytes - 2 * limits.messageHeaderBytes);
  }
  return bytes;
}

/** Rank 0 keeps the server it hosts until every rank has said goodbye. */
function releaseRendezvous(rdv: Rendezvous, job: JobEnvironment): () => void {
  return () => {
    const done = async () => {
      if (rdv.server !== undefined) {
        await barrier(rdv.client, 'close', job.rank, job.size, 60_000).catch(() => undefined);
        await rdv.server.close();
      } else {
        await rdv.client.put(`close/${job.rank}`, '').catch(() => undefined);
      }
      await rdv.client.close();
    };
    void done().catch(() => undefined);
  };
}

