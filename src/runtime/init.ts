import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { cpus as osCpus, hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Communicator } from '../communicator.js';
import { loadConfigFile, resolveConfig, validateConfig } from '../config/load.js';
import type { TopocollConfig, TopocollConfigInput } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import type { Group, GroupPlan, RankPlacement } from '../groups/plan.js';
import { NativeEngine } from '../native.js';
import { readProcessAffinity } from '../topology/affinity.js';
import { discoverMachine } from '../topology/discover.js';
import { formatIndexList, parseIndexList } from '../topology/index-list.js';
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
import { coRunnersOf } from './co-runners.js';
import { JobPlanner, type JobPlans, type TcpDirectory } from './job-planner.js';
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
  /** The CPUs the process may run on, as an index list ("0-3,8"). */
  cpus: string;
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
  const me: RankInfo = { node, host: hostname(), locality, cpus: formatIndexList(here.cpus), ...(network.kind === 'slurm' ? { slurmPath: network.path } : {}) };

  const rdv = await connectRendezvous(job, timeoutMs);
  try {
    const infos = rdv ? (await allgather(rdv.client, 'init/info', job.rank, job.size, JSON.stringify(me), timeoutMs)).map((s) => JSON.parse(s) as RankInfo) : [me];
    const placements: RankPlacement[] = infos.map((info, rank) => ({ rank, node: info.node, locality: info.locality }));
    const net: NetworkTopology | undefined =
      network.kind === 'file' ? network.network : network.kind === 'slurm' ? networkFromSlurmAddresses(infos.map((i) => i.slurmPath!)) : undefined;
    const localRanks = placements.filter((p) => p.node === node).map((p) => p.rank);
    const localRank = localRanks.indexOf(job.rank);
    const layout = shmLayout(config, localRanks.length, osCpus().length);
    // Emulated nodes share one machine: what matters is how many ranks share its cores.
    const oversubscribed = infos.filter((i) => i.host === me.host).length > osCpus().length;
    const engine = new NativeEngine({
      rank: job.rank,
      size: job.size,
      localRanks,
      channelBytes: layout.channelBytes,
      oversubscribed,
      coRunners: coRunnersOf(job.rank, new Map(localRanks.map((r) => [r, parseIndexList(infos[r]!.cpus)]))),
      bcast: layout.bcast,
      asymmetricFences: config.shm.membarrier,
    });
    let planner: JobPlanner;
    let plans: JobPlans;
    let shmGroups: Map<Group, number>;
    try {
      const tcp = rdv ? await openLinks(engine, rdv.client, rdv.token, job, infos, localRanks, timeoutMs) : undefined;
      planner = new JobPlanner(job.rank, placements, net, engine, tcp);
      plans = planner.build(config);
      warnIfUnbound(plans.plan, job.rank, locality);
      planner.connect([plans.plan, plans.orderedPlan]);
      shmGroups = planner.registerShm(plans.plan);
      engine.start();
      if (rdv) await barrier(rdv.client, 'init/ready', job.rank, job.size, timeoutMs);
    } catch (e) {
      engine.close();
      throw e;
    }
    const onClose = rdv ? releaseRendezvous(rdv, job) : undefined;
    return new Communicator({ engine, planner, plans, config, node, localRank, localSize: localRanks.length, oversubscribed, shmGroups, numaNode: here.numaNode, onClose });
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
function whereThisProcessRuns(config: TopocollConfig, env: NodeJS.ProcessEnv): { locality: string; cpus: number[]; numaNode?: number } {
  const machine = discoverMachine({ hwlocXml: config.topology.hwlocXml ?? undefined, env, source: config.topology.source });
  const cpus = readProcessAffinity();
  return { locality: formatLocality(computeLocality(machine, cpus).locality), cpus, numaNode: numaNodeOf(machine.objects.numa, cpus) };
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

/**
 * Maps the node's shared segment, and — when the job spans nodes — opens this rank's TCP
 * listening socket and learns every rank's address, so links can be made now and later (a
 * reconfiguration may need new ones).
 */
async function openLinks(
  engine: NativeEngine,
  client: RendezvousClient,
  token: string,
  job: JobEnvironment,
  infos: RankInfo[],
  localRanks: number[],
  timeoutMs: number,
): Promise<TcpDirectory | undefined> {
  const node = infos[job.rank]!.node;
  const nodes = [...new Set(infos.map((i) => i.node))];
  const nodeIndex = nodes.indexOf(node);
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
  if (nodes.length < 2) return undefined;
  const port = engine.listenTcp();
  const ports = (await allgather(client, 'init/tcp', job.rank, job.size, String(port), timeoutMs)).map(Number);
  // All ranks on one machine (emulated nodes) talk over loopback.
  const oneHost = infos.every((i) => i.host === infos[0]!.host);
  const addresses = infos.map((info, rank) => ({ rank, host: oneHost ? '127.0.0.1' : info.host, port: ports[rank]! }));
  return { token, addresses, timeoutMs };
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

