import net from 'node:net';
import { cpus as osCpus, hostname } from 'node:os';
import { Communicator } from './communicator.js';
import { createCommunicator } from './p2p/create-communicator.js';
import type { TopocollConfig, TopocollConfigInput } from './config/schema.js';
import { TopocollError } from './errors.js';
import { formatIndexList } from './topology/index-list.js';
import { networkFromSlurmAddresses } from './topology/network/slurm-address.js';
import { resolveNetworkSource } from './topology/network/network-source.js';
import type { NetworkTopology } from './topology/network/types.js';
import { resolveNodeIdentity } from './topology/node-identity.js';
import { detectEnvironment, type JobEnvironment } from './runtime/environment.js';
import { configFor, whereThisProcessRuns } from './runtime/this-process.js';
import { removeJobSegments } from './runtime/segment-name.js';
import { kernelId } from './runtime/co-runners.js';
import { joinJob, linkAddress, bindForMessages, type JoinChannel, type RankInfo } from './runtime/join.js';
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

/**
 * Joins the job: finds the other processes through the rendezvous, exchanges node names and
 * locality strings, builds the same groups and plans on every rank, maps the node's shared
 * segment and connects to the ranks of other nodes it shares a group with.
 */
export async function init(options: InitOptions = {}): Promise<Communicator> {
  const env = options.env ?? process.env;
  const job = detectEnvironment(env);
  const config = configFor(options.config, job, env);
  if (config.transport === 'mpi') return initOverMpi(job, config, env);
  const timeoutMs = job.timeoutMs ?? config.timeouts.initMs;
  const node = job.nodeName ?? resolveNodeIdentity(config.node.identity, env);
  const network = resolveNetworkSource(job.networkFile ? { source: 'file', file: job.networkFile } : config.network, env, node);
  const here = whereThisProcessRuns(config, env);
  const locality = config.topology.locality ?? env.TOPOCOLL_LOCALITY ?? here.locality;
  const rdv = await connectRendezvous(job, timeoutMs);
  const me: RankInfo = {
    node,
    host: hostname(),
    kernel: kernelId(),
    locality,
    cpus: formatIndexList(here.cpus),
    machineCpus: osCpus().length,
    address: rdv?.client.localAddress ?? '127.0.0.1',
    rendezvousAddress: rdv?.client.remoteAddress ?? '127.0.0.1',
    ...(network.kind === 'slurm' ? { slurmPath: network.path } : {}),
  };

  let messages: ReturnType<typeof bindForMessages> | undefined;
  try {
    messages = bindForMessages(job.rank, job.size, config);
    me.messagesPort = messages.port;
    const infos = rdv
      ? (await allgather(rdv.client, 'init/info', job.rank, job.size, JSON.stringify(me), timeoutMs)).map((s) => JSON.parse(s) as RankInfo)
      : [me];
    const net: NetworkTopology | undefined =
      network.kind === 'file' ? network.network : network.kind === 'slurm' ? networkFromSlurmAddresses(infos.map((i) => i.slurmPath!)) : undefined;
    const parts = await joinJob(job.rank, infos, config, net, here.numaNode, rendezvousChannel(rdv, job, infos, timeoutMs));
    messages.native.listen();
    if (rdv) {
      try {
        await barrier(rdv.client, 'init/ready', job.rank, job.size, timeoutMs);
      } catch (e) {
        parts.engine.close();
        throw e;
      }
      // Nothing after init uses the rendezvous: each rank says goodbye, and rank 0's server ends
      // once all have (so nothing of it keeps a process alive).
      await rdv.client.close();
    }
    return new Communicator({ ...parts, messages: { native: messages.native, token: rdv?.token ?? '' } });
  } catch (e) {
    messages?.native.close();
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

/**
 * transport: mpi — the job's setup and the messages between nodes go over MPI_COMM_WORLD
 * (topocoll/mpi's world communicator, initialised here or joined), exactly as createCommunicator
 * over it: no rendezvous, no port.
 */
async function initOverMpi(job: JobEnvironment, config: TopocollConfig, env: NodeJS.ProcessEnv): Promise<Communicator> {
  let mpi: typeof import('./mpi.js');
  try {
    mpi = await import('./mpi.js');
  } catch (e) {
    throw new TopocollError('ECONFIG', `transport: mpi, but topocoll/mpi does not load: ${e instanceof Error ? e.message : String(e)}`, { rank: job.rank });
  }
  if (!mpi.mpiAvailable()) {
    throw new TopocollError('ECONFIG', 'transport: mpi, but topocoll/mpi is not built', {
      rank: job.rank,
      hint: 'Install Open MPI or MPICH (mpicc on PATH) and run "npm run build:mpi" in the topocoll package, or use transport: tcp.',
    });
  }
  const world = mpi.initMpi();
  if (job.launcher !== 'single' && (world.rank !== job.rank || world.size !== job.size)) {
    throw new TopocollError(
      'ECONFIG',
      `transport: mpi: MPI says rank ${world.rank} of ${world.size}, the launcher's variables rank ${job.rank} of ${job.size}`,
      {
        rank: job.rank,
        hint: "Start the job with the launcher of the MPI topocoll/mpi was built against (Open MPI's mpirun, MPICH's mpiexec; TOPOCOLL_MPI_ADDON chooses the build), or srun with MPI support.",
      },
    );
  }
  return createCommunicator(world, { config, env });
}

/**
 * Joining over the rendezvous: segment names through its store, TCP links to the ranks of other
 * nodes (this rank's listening socket and every rank's port through the store). Without a
 * rendezvous the job is this one process.
 */
function rendezvousChannel(rdv: Rendezvous | undefined, job: JobEnvironment, infos: RankInfo[], timeoutMs: number): JoinChannel {
  const none = (): never => {
    throw new TopocollError('EINVAL', `rank ${job.rank} needs other ranks, but the job has no rendezvous`, { rank: job.rank });
  };
  return {
    segmentToken: rdv?.token ?? '',
    timeoutMs,
    links: { kind: 'tcp' },
    publishSegment: async (nodeIndex, name) => (rdv ? rdv.client.put(`init/shm/${nodeIndex}`, name) : none()),
    segmentOf: async (nodeIndex) => (rdv ? rdv.client.get(`init/shm/${nodeIndex}`, timeoutMs) : none()),
    linkNodes: async (engine) => {
      if (!rdv) return none();
      const port = engine.listenTcp(linkAddress(infos, job.rank));
      const ports = (await allgather(rdv.client, 'init/tcp', job.rank, job.size, String(port), timeoutMs)).map(Number);
      const addresses = infos.map((_, rank) => ({ rank, host: linkAddress(infos, rank), port: ports[rank]! }));
      return { token: rdv.token, addresses, timeoutMs };
    },
    between: async () => {
      await new Promise((r) => setImmediate(r));
      rdv?.client.throwIfAborted();
    },
  };
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
  if (plan.kind === 'missing') throw plan.error;
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
