import net from 'node:net';
import { cpus as osCpus, hostname } from 'node:os';
import { Communicator } from './communicator.js';
import { loadConfigFile, resolveConfig, validateConfig } from './config/load.js';
import type { TopocollConfig, TopocollConfigInput } from './config/schema.js';
import { TopocollError } from './errors.js';
import type { GroupPlan } from './groups/plan.js';
import { NativeEngine } from './native.js';
import { readProcessAffinity } from './topology/affinity.js';
import { discoverMachine } from './topology/discover.js';
import { formatIndexList, parseIndexList } from './topology/index-list.js';
import { formatLocality } from './topology/locality-string.js';
import { networkFromSlurmAddresses } from './topology/network/slurm-address.js';
import { resolveNetworkSource } from './topology/network/network-source.js';
import type { NetworkTopology, NodeNetworkPath } from './topology/network/types.js';
import { resolveNodeIdentity } from './topology/node-identity.js';
import { computeLocality } from './topology/process-locality.js';
import type { RankPlacement } from './topology/types.js';
import { detectEnvironment, type JobEnvironment } from './runtime/environment.js';
import { numaNodeOf } from './runtime/numa-residency.js';
import { removeJobSegments, segmentName } from './runtime/segment-name.js';
import { shmLayout } from './runtime/shm-budget.js';
import { coRunnersOf } from './runtime/co-runners.js';
import { JobPlanner, type TcpDirectory } from './runtime/job-planner.js';
import { RendezvousClient } from './runtime/rendezvous/client.js';
import { allgather, barrier } from './runtime/rendezvous/collectives.js';
import { createJobToken } from './runtime/rendezvous/protocol.js';
import { readRendezvousFile, removeRendezvousFileOfDeadWriter, rendezvousFilePath } from './runtime/rendezvous/file.js';
import { hostRendezvous, type HostedRendezvous } from './runtime/rendezvous/host.js';

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
  /**
   * The IPv4 address of this rank's end of its rendezvous connection (the interface that routes
   * to the rendezvous), and the address it reached the rendezvous at; see linkAddress.
   */
  address: string;
  rendezvousAddress: string;
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
  const rdv = await connectRendezvous(job, timeoutMs);
  const me: RankInfo = {
    node,
    host: hostname(),
    locality,
    cpus: formatIndexList(here.cpus),
    address: rdv?.client.localAddress ?? '127.0.0.1',
    rendezvousAddress: rdv?.client.remoteAddress ?? '127.0.0.1',
    ...(network.kind === 'slurm' ? { slurmPath: network.path } : {}),
  };

  let engine: NativeEngine | undefined;
  try {
    const infos = rdv
      ? (await allgather(rdv.client, 'init/info', job.rank, job.size, JSON.stringify(me), timeoutMs)).map((s) => JSON.parse(s) as RankInfo)
      : [me];
    const placements: RankPlacement[] = infos.map((info, rank) => ({ rank, node: info.node, locality: info.locality }));
    const net: NetworkTopology | undefined =
      network.kind === 'file' ? network.network : network.kind === 'slurm' ? networkFromSlurmAddresses(infos.map((i) => i.slurmPath!)) : undefined;
    const localRanks = placements.filter((p) => p.node === node).map((p) => p.rank);
    const localRank = localRanks.indexOf(job.rank);
    const layout = shmLayout(config, localRanks.length, osCpus().length);
    // Emulated nodes share one machine: what matters is how many ranks share its cores.
    const oversubscribed = infos.filter((i) => i.host === me.host).length > osCpus().length;
    engine = new NativeEngine({
      rank: job.rank,
      size: job.size,
      localRanks,
      channelBytes: layout.channelBytes,
      oversubscribed,
      coRunners: coRunnersOf(job.rank, new Map(localRanks.map((r) => [r, parseIndexList(infos[r]!.cpus)]))),
      bcast: layout.bcast,
      asymmetricFences: config.shm.membarrier,
      collectiveTimeoutMs: config.timeouts.collectiveMs,
      schedulerSliceUs: config.scheduler.sliceUs,
    });
    const tcp = rdv ? await openLinks(engine, rdv.client, rdv.token, job, infos, localRanks, timeoutMs) : undefined;
    const planner = new JobPlanner(job.rank, placements, net, engine, tcp);
    const plans = planner.build(config);
    warnIfUnbound(plans.plan, job.rank, locality);
    await planner.connectWatching([plans.plan, plans.orderedPlan], async () => {
      await new Promise((r) => setImmediate(r));
      rdv?.client.throwIfAborted();
    });
    const shmGroups = planner.registerShm(plans.plan);
    engine.start();
    if (rdv) {
      await barrier(rdv.client, 'init/ready', job.rank, job.size, timeoutMs);
      // Nothing after init uses the rendezvous: each rank says goodbye, and rank 0's server ends
      // once all have (so nothing of it keeps a process alive).
      await rdv.client.close();
    }
    return new Communicator({
      engine,
      planner,
      plans,
      config,
      node,
      localRank,
      localSize: localRanks.length,
      oversubscribed,
      shmGroups,
      numaNode: here.numaNode,
    });
  } catch (e) {
    engine?.close();
    if (rdv) {
      await rdv.client.abort(job.rank, e instanceof Error ? e.message : String(e));
      await rdv.client.close().catch(() => undefined);
      rdv.host?.release();
      // A node leader that died between creating its segment and every rank mapping it leaves
      // the name behind; whoever of the job fails here removes what is left on its machine.
      removeJobSegments(rdv.token);
      if (rdv.file !== undefined) removeRendezvousFileOfDeadWriter(rdv.file);
    }
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
    process.emitWarning(
      `topocoll: processes on ${node} are not bound to cores (${spans.reason}; locality ${locality || 'unknown'}), so only the node level and above are used. Bind them: topocoll run --bind core, mpirun --bind-to core, or srun --cpu-bind=cores.`,
    );
  }
}

interface Rendezvous {
  client: RendezvousClient;
  /** Rank 0's server, when rank 0 hosts it. */
  host?: HostedRendezvous;
  token: string;
  /** The private file that tells the ranks of rank 0's machine the port and token, if the job uses one. */
  file?: string;
}

/**
 * Connects to the job's rendezvous: the launcher's, or rank 0's (which rank 0 starts on a thread
 * of its own first). Where the ranks cannot know the token (no TOPOCOLL_TOKEN) or the port (no
 * MASTER_PORT), rank 0 leaves them in a private file only the ranks of its machine can read.
 */
async function connectRendezvous(job: JobEnvironment, timeoutMs: number): Promise<Rendezvous | undefined> {
  const plan = job.rendezvous;
  if (plan.kind === 'none' || job.size === 1) return undefined;
  const connect = async (host: string, port: number, token: string, ms: number, file?: string, hosted?: HostedRendezvous): Promise<Rendezvous> => {
    const client = await RendezvousClient.connect({ host, port, token, rank: job.rank, timeoutMs: ms });
    client.watchAbort();
    return { client, token, file, host: hosted };
  };
  if (plan.kind === 'address' && !plan.hostedByRank0) return connect(plan.host, plan.port, plan.token, timeoutMs);

  const host = plan.kind === 'file' ? '127.0.0.1' : plan.host;
  const given = plan.kind === 'address' ? plan.token : undefined;
  const file = given === undefined ? rendezvousFilePath(plan.jobKey) : undefined;
  if (job.rank === 0) {
    const token = given ?? createJobToken();
    const hosted = await hostRendezvous({
      token,
      host: plan.kind === 'file' || isLoopback(host) ? host : '0.0.0.0',
      port: plan.kind === 'file' ? 0 : plan.port,
      ranks: job.size,
      // Past the init timeout of the last rank to start, nobody needs the server.
      lifetimeMs: 2 * timeoutMs + 5_000,
      file,
    });
    try {
      return await connect(host, hosted.port, token, timeoutMs, file, hosted);
    } catch (e) {
      hosted.release();
      throw e;
    }
  }
  if (given !== undefined) return connect(host, (plan as { port: number }).port, given, timeoutMs);

  // Wait for rank 0's file. With a known address, a server that is up while the file is missing
  // means rank 0 runs on another machine: rank 0 writes the file before it listens.
  const deadline = Date.now() + timeoutMs;
  let nextProbe = 0;
  for (;;) {
    const content = readRendezvousFile(file!);
    if (content !== undefined) return connect(host, content.port, content.token, Math.max(1, deadline - Date.now()), file);
    if (plan.kind === 'address' && Date.now() >= nextProbe) {
      nextProbe = Date.now() + 200;
      if ((await listening(host, plan.port)) && readRendezvousFile(file!) === undefined) {
        throw new TopocollError('ECONFIG', `the rendezvous at ${host}:${plan.port} runs on another machine, and TOPOCOLL_TOKEN is not set`, {
          rank: job.rank,
          hint: 'A job across machines needs the same random secret in TOPOCOLL_TOKEN on every rank (e.g. export TOPOCOLL_TOKEN=$(openssl rand -hex 16) before the launcher).',
        });
      }
    }
    if (Date.now() > deadline) {
      removeRendezvousFileOfDeadWriter(file!);
      throw new TopocollError('ETIMEDOUT', `rank 0 did not publish the rendezvous in ${file} within ${timeoutMs} ms`, {
        rank: job.rank,
        hint:
          plan.kind === 'file'
            ? 'Rank 0 may have failed (see its output). For jobs on several nodes set MASTER_ADDR, MASTER_PORT and TOPOCOLL_TOKEN.'
            : 'Rank 0 may have failed (see its output).',
      });
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** Whether something accepts TCP connections at host:port (within a second). */
function listening(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (up: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(up);
    };
    const timer = setTimeout(() => done(false), 1000);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
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
      // In short native waits, so that an abort of the job (a rank of this node that died before
      // mapping) ends this wait as soon as the rendezvous reports it.
      const deadline = Date.now() + timeoutMs;
      while (!engine.allMappedAndUnlink(5)) {
        if (Date.now() > deadline) {
          throw new TopocollError('ETIMEDOUT', `not every rank of node ${node} mapped the shared segment within ${timeoutMs} ms`, { rank: job.rank, node });
        }
        await new Promise((r) => setImmediate(r));
        client.throwIfAborted();
      }
    } else {
      engine.openSegment(await client.get(`init/shm/${nodeIndex}`, timeoutMs));
    }
  }
  if (nodes.length < 2) return undefined;
  const port = engine.listenTcp(linkAddress(infos, job.rank));
  const ports = (await allgather(client, 'init/tcp', job.rank, job.size, String(port), timeoutMs)).map(Number);
  const addresses = infos.map((_, rank) => ({ rank, host: linkAddress(infos, rank), port: ports[rank]! }));
  return { token, addresses, timeoutMs };
}

/**
 * The address rank `rank` listens on for TCP links and the others connect to: on one machine
 * (emulated nodes) loopback; else the address it reaches the rendezvous from. A rank that
 * reaches it over loopback runs on the rendezvous's machine (MASTER_ADDR given as a name that
 * resolves to 127.0.1.1 there, as Debian's /etc/hosts does): it uses the address the ranks of
 * other machines reached the rendezvous at.
 */
function linkAddress(infos: RankInfo[], rank: number): string {
  if (infos.every((i) => i.host === infos[0]!.host)) return '127.0.0.1';
  const own = infos[rank]!.address;
  if (!own.startsWith('127.')) return own;
  return infos.find((i) => !i.address.startsWith('127.'))?.rendezvousAddress ?? own;
}
