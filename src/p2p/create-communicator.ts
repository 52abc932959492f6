import { cpus as osCpus, hostname } from 'node:os';
import { Communicator } from '../communicator.js';
import type { TopocollConfigInput } from '../config/schema.js';
import { TopocollError, isTopocollError } from '../errors.js';
import { openP2PLayer, type NativeP2PLayer } from '../native.js';
import { detectEnvironment } from '../runtime/environment.js';
import { kernelId } from '../runtime/co-runners.js';
import { joinJob, bindForMessages, type JoinChannel, type RankInfo } from '../runtime/join.js';
import { configFor, whereThisProcessRuns } from '../runtime/this-process.js';
import { createJobToken } from '../runtime/rendezvous/protocol.js';
import { removeJobSegments } from '../runtime/segment-name.js';
import { formatIndexList } from '../topology/index-list.js';
import { resolveNetworkSource } from '../topology/network/network-source.js';
import { networkFromSlurmAddresses } from '../topology/network/slurm-address.js';
import type { NetworkTopology } from '../topology/network/types.js';
import { resolveNodeIdentity } from '../topology/node-identity.js';
import { bridgeJsLayer, describe } from './js-layer.js';
import { NativeLayerMessages } from './native-layer.js';
import { LAYER_TAGS, MAX_COMMUNICATORS_PER_LAYER, communicatorTags, type NativePointToPoint, type PointToPoint } from './point-to-point.js';

export interface CreateCommunicatorOptions {
  /** A YAML file, or configuration given in code; default: TOPOCOLL_CONFIG, else the shipped defaults. */
  config?: string | TopocollConfigInput;
  /** The compute node this rank runs on; default as init() decides it (TOPOCOLL_NODE, else node.identity). */
  node?: string;
  /** Environment to read TOPOCOLL_* from; default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** Why blocking collectives cannot cross nodes over a JavaScript layer. */
const BLOCKING_OVER_JS =
  'blocking (Sync) collectives and configure() cannot run on this communicator: its nodes are linked by a JavaScript point-to-point layer, whose send and recv need the event loop that a blocking call holds. Use the Promise form (await comm.allreduce(...)) with a built-in operator — a user operator runs on the calling thread even in the Promise form —, or a native layer (p2p.native, e.g. from topocoll/mpi)';

/** Bytes of a setup message: one rank's information, or every rank's (rank 0 to the others). */
const SETUP_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Per host layer object: its native struct opened once, how many communicators were made over
 * it, and how many sub-communicators (split, dup) of those (their tags: point-to-point.ts).
 */
const layers = new WeakMap<
  object,
  { native: NativeP2PLayer; made: number; subCommunicators: { made: number }; finishSends: ((timeoutMs: number) => void) | undefined }
>();

/**
 * Makes a communicator whose ranks are the host layer's ranks, carried by that layer between
 * nodes (ranks of one node still use topocoll's shared memory). Collective: every rank of the
 * layer calls it, in the same order as any other createCommunicator over the same layer. The
 * setup (node names, locality strings, the shared segments' names) goes over the layer too.
 */
export async function createCommunicator(p2p: PointToPoint | NativePointToPoint, options: CreateCommunicatorOptions = {}): Promise<Communicator> {
  const env = options.env ?? process.env;
  const js = typeof p2p === 'object' && p2p !== null && 'send' in p2p ? p2p : undefined;
  if (js !== undefined) checkLayer(js);
  else if (typeof p2p !== 'object' || p2p === null || typeof p2p.native !== 'object' || p2p.native === null) {
    throw new TopocollError('EINVAL', 'createCommunicator: the layer needs send and recv, or a native topocoll_p2p_v1 as `native`');
  }
  let held = layers.get(p2p);
  if (held === undefined) {
    const bridged = js !== undefined && js.native === undefined ? bridgeJsLayer(js, js.tagBase ?? 0) : undefined;
    const native = openP2PLayer(js === undefined ? (p2p as NativePointToPoint).native : (js.native ?? bridged!.native));
    if (js !== undefined && (native.rank !== js.rank || native.size !== js.size || native.tagBase !== (js.tagBase ?? 0))) {
      throw new TopocollError(
        'EINVAL',
        `createCommunicator: the native struct says rank ${native.rank} of ${native.size} (tag base ${native.tagBase}), the layer rank ${js.rank} of ${js.size} (tag base ${js.tagBase ?? 0})`,
        { rank: js.rank },
      );
    }
    held = { native, made: 0, subCommunicators: { made: 0 }, finishSends: bridged?.finishSends };
    layers.set(p2p, held);
  }
  // Without send/recv, the setup's messages go through the struct too.
  const setupLayer = js ?? new NativeLayerMessages(held.native);
  const rank = setupLayer.rank;
  const tagBase = held.native.tagBase;
  const job = detectEnvironment(env);
  const config = configFor(options.config, job, env);
  const timeoutMs = job.timeoutMs ?? config.timeouts.initMs;
  if (held.made >= MAX_COMMUNICATORS_PER_LAYER) {
    throw new TopocollError('EINVAL', `createCommunicator: ${MAX_COMMUNICATORS_PER_LAYER} communicators were made over this layer already`, { rank });
  }
  const tags = communicatorTags(tagBase, held.made++);
  const setup = new SetupMessages(setupLayer, tags.setup, timeoutMs);

  const node = options.node ?? job.nodeName ?? resolveNodeIdentity(config.node.identity, env);
  const network = resolveNetworkSource(job.networkFile ? { source: 'file', file: job.networkFile } : config.network, env, node);
  const here = whereThisProcessRuns(config, env);
  const me: RankInfo = {
    node,
    host: hostname(),
    kernel: kernelId(),
    locality: config.topology.locality ?? env.TOPOCOLL_LOCALITY ?? here.locality,
    cpus: formatIndexList(here.cpus),
    machineCpus: osCpus().length,
    ...(network.kind === 'slurm' ? { slurmPath: network.path } : {}),
  };
  let token: string | undefined;
  let messages: ReturnType<typeof bindForMessages> | undefined;
  try {
    messages = bindForMessages(rank, setupLayer.size, config);
    me.messagesPort = messages.port;
    const gathered = await setup.allgatherInfo(me);
    token = gathered.token;
    const infos = gathered.infos;
    const net: NetworkTopology | undefined =
      network.kind === 'file' ? network.network : network.kind === 'slurm' ? networkFromSlurmAddresses(infos.map((i) => i.slurmPath!)) : undefined;
    const channel: JoinChannel = {
      segmentToken: token,
      timeoutMs,
      links: {
        kind: 'p2p',
        layer: held.native,
        subCommunicators: held.subCommunicators,
        ...(js !== undefined && js.native === undefined ? { refuseBlocking: BLOCKING_OVER_JS } : {}),
        ...(held.finishSends !== undefined ? { finishSends: held.finishSends } : {}),
      },
      publishSegment: async (_nodeIndex, name, localRanks) => {
        await Promise.all(localRanks.filter((r) => r !== rank).map((r) => setup.send(r, { segment: name })));
      },
      segmentOf: async (_nodeIndex, leader) => {
        const got = await setup.recv(leader);
        if (typeof got.segment !== 'string') throw setup.unexpected(leader, 'the shared segment name');
        return got.segment;
      },
      linkNodes: (engine) => {
        engine.useP2P(held.native, tags.collectives);
        if (js !== undefined && js.native === undefined) engine.refuseBlocking(BLOCKING_OVER_JS);
        return Promise.resolve({ p2p: true });
      },
      between: () => new Promise((r) => setImmediate(r)),
    };
    const parts = await joinJob(rank, infos, config, net, here.numaNode, channel);
    try {
      messages.native.listen();
      await setup.barrier();
    } catch (e) {
      parts.engine.close();
      throw e;
    }
    return new Communicator({ ...parts, messages: { native: messages.native, token } });
  } catch (e) {
    messages?.native.close();
    await setup.abort(e);
    if (token !== undefined) removeJobSegments(token);
    throw e;
  } finally {
    if (setupLayer instanceof NativeLayerMessages) setupLayer.stop();
  }
}

function checkLayer(p2p: PointToPoint): void {
  const { rank, size } = p2p;
  if (!Number.isSafeInteger(size) || size < 1 || !Number.isSafeInteger(rank) || rank < 0 || rank >= size) {
    throw new TopocollError('EINVAL', `createCommunicator: the layer says rank ${String(rank)} of ${String(size)}`);
  }
  if (typeof p2p.send !== 'function' || typeof p2p.recv !== 'function') {
    throw new TopocollError('EINVAL', 'createCommunicator: the layer needs send(peer, tag, data) and recv(peer, tag, maxBytes)', { rank });
  }
  const base = p2p.tagBase ?? 0;
  if (!Number.isSafeInteger(base) || base < 0 || base > 2 ** 31 - LAYER_TAGS) {
    throw new TopocollError('EINVAL', `createCommunicator: tagBase ${String(base)} leaves no room for topocoll's tags below 2^31`, { rank });
  }
}

/** One setup message: JSON, one field per kind. */
interface SetupMessage {
  info?: RankInfo;
  all?: { infos: RankInfo[]; token: string };
  segment?: string;
  ready?: true;
  go?: true;
  abort?: string;
}

/**
 * The setup's messages over the layer, on the communicator's setup tag: rank 0 gathers every
 * rank's information and sends all of it (and the job's segment token) back; node leaders send
 * their segment's name; a gather-and-release barrier ends it. Every receive has the setup
 * timeout; a rank that fails tells every other (best effort), so they fail rather than wait.
 */
class SetupMessages {
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly p2p: PointToPoint,
    private readonly tag: number,
    private readonly timeoutMs: number,
  ) {}

  async send(peer: number, message: SetupMessage): Promise<void> {
    try {
      await this.p2p.send(peer, this.tag, this.encoder.encode(JSON.stringify(message)));
    } catch (e) {
      throw new TopocollError('EPEERLOST', `createCommunicator: the layer's send to rank ${peer} (tag ${this.tag}) failed: ${describe(e)}`, {
        rank: this.p2p.rank,
      });
    }
  }

  async recv(peer: number): Promise<SetupMessage> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new TopocollError('ETIMEDOUT', `createCommunicator: nothing from rank ${peer} (tag ${this.tag}) within ${this.timeoutMs} ms`, {
              rank: this.p2p.rank,
              hint: 'That rank may not have called createCommunicator, or may have failed (see its output).',
            }),
          ),
        this.timeoutMs,
      );
    });
    let bytes: Uint8Array;
    try {
      bytes = await Promise.race([this.p2p.recv(peer, this.tag, SETUP_MESSAGE_BYTES), timeout]);
    } catch (e) {
      if (isTopocollError(e)) throw e;
      throw new TopocollError('EPEERLOST', `createCommunicator: the layer's recv from rank ${peer} (tag ${this.tag}) failed: ${describe(e)}`, {
        rank: this.p2p.rank,
      });
    } finally {
      clearTimeout(timer);
    }
    let message: SetupMessage;
    try {
      message = JSON.parse(this.decoder.decode(bytes)) as SetupMessage;
    } catch {
      throw this.unexpected(peer, 'a setup message');
    }
    if (typeof message.abort === 'string') {
      throw new TopocollError('EPEERLOST', `createCommunicator: rank ${peer} failed during the setup: ${message.abort}`, { rank: this.p2p.rank });
    }
    return message;
  }

  unexpected(peer: number, what: string): TopocollError {
    return new TopocollError('EMISMATCH', `createCommunicator: rank ${peer} sent something other than ${what} on tag ${this.tag}`, {
      rank: this.p2p.rank,
      hint: 'Every rank must create communicators over the layer in the same order, and the host must leave topocoll its tags.',
    });
  }

  async allgatherInfo(me: RankInfo): Promise<{ infos: RankInfo[]; token: string }> {
    const { rank, size } = this.p2p;
    if (size === 1) return { infos: [me], token: createJobToken() };
    if (rank !== 0) {
      await this.send(0, { info: me });
      const got = await this.recv(0);
      if (got.all === undefined || got.all.infos.length !== size) throw this.unexpected(0, "every rank's information");
      return got.all;
    }
    const infos: RankInfo[] = [me];
    const others = await Promise.all(Array.from({ length: size - 1 }, (_, i) => this.recv(i + 1)));
    others.forEach((m, i) => {
      if (m.info === undefined) throw this.unexpected(i + 1, "the rank's information");
      infos.push(m.info);
    });
    const all = { infos, token: createJobToken() };
    await Promise.all(Array.from({ length: size - 1 }, (_, i) => this.send(i + 1, { all })));
    return all;
  }

  async barrier(): Promise<void> {
    const { rank, size } = this.p2p;
    if (size === 1) return;
    if (rank !== 0) {
      await this.send(0, { ready: true });
      if ((await this.recv(0)).go !== true) throw this.unexpected(0, 'the end of the setup');
      return;
    }
    const ready = await Promise.all(Array.from({ length: size - 1 }, (_, i) => this.recv(i + 1)));
    ready.forEach((m, i) => {
      if (m.ready !== true) throw this.unexpected(i + 1, 'its readiness');
    });
    await Promise.all(Array.from({ length: size - 1 }, (_, i) => this.send(i + 1, { go: true })));
  }

  /** Tells every other rank that this one failed; waits a little for the sends, never fails. */
  async abort(e: unknown): Promise<void> {
    const { rank, size } = this.p2p;
    const text = `rank ${rank}: ${describe(e)}`;
    const sends = Array.from({ length: size }, (_, r) => r)
      .filter((r) => r !== rank)
      .map((r) => this.send(r, { abort: text }).catch(() => undefined));
    await Promise.race([Promise.all(sends), new Promise((r) => setTimeout(r, 200))]);
  }
}
