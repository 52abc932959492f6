import { readFileSync } from 'node:fs';
import { TopocollError } from '../errors.js';

/**
 * How this process was started, in the order of docs/architecture.md §2.1: the `topocoll run` launcher,
 * Open MPI, MPICH's Hydra, Slurm, the torchrun convention, else a world of one. Everything is
 * read from the environment (and, under Hydra, the parent process's name); nothing is contacted
 * here.
 */

export type LauncherKind = 'topocoll' | 'openmpi' | 'mpich' | 'slurm' | 'torchrun' | 'single';

/** The parent of this process: its pid and command name (/proc/<pid>/comm), if readable. */
export interface ParentProcess {
  pid: number;
  command?: string;
}

/** Where the rendezvous server is, or how to find it. */
export type RendezvousPlan =
  /** The launcher's server: address and token handed down. */
  | { kind: 'address'; host: string; port: number; token: string; hostedByRank0: false }
  /**
   * MASTER_ADDR:MASTER_PORT, hosted by rank 0. Without a token given (TOPOCOLL_TOKEN), rank 0
   * makes one and leaves it in a private file named by `jobKey`, which only ranks on its machine
   * can read.
   */
  | { kind: 'address'; host: string; port: number; token?: string; hostedByRank0: true; jobKey: string }
  /** Rank 0 hosts on loopback and leaves its address and token in a private file named by the job key (one node only). */
  | { kind: 'file'; jobKey: string }
  /**
   * None can be found (a job across nodes without an address): init() over TCP fails with
   * `error` before it contacts anything; a job whose setup goes over another layer (transport:
   * mpi, createCommunicator) needs none.
   */
  | { kind: 'missing'; error: TopocollError }
  | { kind: 'none' };

export interface JobEnvironment {
  launcher: LauncherKind;
  rank: number;
  size: number;
  rendezvous: RendezvousPlan;
  /** Node name forced by the launcher or TOPOCOLL_NODE (emulated nodes), else undefined. */
  nodeName?: string;
  /** Configuration file, network file and timeout handed down by the launcher. */
  configFile?: string;
  networkFile?: string;
  timeoutMs?: number;
}

/** `parent` is asked only under Hydra (tests give their own). */
export function detectEnvironment(env: NodeJS.ProcessEnv = process.env, parent: () => ParentProcess = parentProcess): JobEnvironment {
  if (env.TOPOCOLL_RANK !== undefined) return fromLauncher(env);
  if (env.OMPI_COMM_WORLD_RANK !== undefined) {
    const jobKey = env.PMIX_NAMESPACE ?? env.OMPI_MCA_ess_base_jobid;
    const multiNode = env.OMPI_COMM_WORLD_LOCAL_SIZE !== undefined && env.OMPI_COMM_WORLD_LOCAL_SIZE !== env.OMPI_COMM_WORLD_SIZE;
    return fromRanks('openmpi', env, 'OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', jobKey && `ompi-${jobKey}`, multiNode);
  }
  // MPICH's Hydra (mpiexec.hydra, Debian's mpiexec.mpich): PMI_RANK and PMI_SIZE, with
  // MPI_LOCALRANKID and MPI_LOCALNRANKS, which only Hydra sets. srun's PMI-2 plugin
  // (--mpi=pmi2) sets PMI_RANK and PMI_SIZE too but not MPI_LOCALNRANKS: that job is Slurm's,
  // below. Hydra goes before Slurm because a Hydra job inside a Slurm allocation inherits the
  // SLURM_PROCID of the proxy srun started on its node (one per node, not the rank).
  if (env.PMI_RANK !== undefined && env.PMI_SIZE !== undefined && env.MPI_LOCALNRANKS !== undefined) {
    return fromRanks('mpich', env, 'PMI_RANK', 'PMI_SIZE', hydraJobKey(parent()), env.MPI_LOCALNRANKS !== env.PMI_SIZE);
  }
  if (env.SLURM_PROCID !== undefined && env.SLURM_NTASKS !== undefined) {
    const jobKey = env.SLURM_JOB_ID && `slurm-${env.SLURM_JOB_ID}.${env.SLURM_STEP_ID ?? '0'}`;
    const nodes = Number(env.SLURM_STEP_NUM_NODES ?? env.SLURM_NNODES ?? '1');
    return fromRanks('slurm', env, 'SLURM_PROCID', 'SLURM_NTASKS', jobKey, nodes > 1);
  }
  if (env.RANK !== undefined && env.WORLD_SIZE !== undefined) return fromRanks('torchrun', env, 'RANK', 'WORLD_SIZE', undefined, false);
  return { launcher: 'single', rank: 0, size: 1, rendezvous: { kind: 'none' } };
}

/**
 * Hydra names its job by no variable. Every rank it starts on a node is a child of that node's
 * one hydra_pmi_proxy of the job, so the proxy's pid names the job among the ranks of one node
 * (the only ones the key's private file serves). A rank whose parent is something else (a shell
 * that did not exec) gets no key: a one-node job then needs MASTER_ADDR/MASTER_PORT.
 */
function hydraJobKey(parent: ParentProcess): string | undefined {
  return parent.command === 'hydra_pmi_proxy' ? `mpich-${parent.pid}` : undefined;
}

function parentProcess(): ParentProcess {
  const pid = process.ppid;
  try {
    return { pid, command: readFileSync(`/proc/${pid}/comm`, 'utf8').trim() };
  } catch {
    return { pid };
  }
}

function fromLauncher(env: NodeJS.ProcessEnv): JobEnvironment {
  const rank = intVar(env, 'TOPOCOLL_RANK');
  const size = intVar(env, 'TOPOCOLL_SIZE');
  const [host, port] = splitAddress(requireVar(env, 'TOPOCOLL_RENDEZVOUS'), 'TOPOCOLL_RENDEZVOUS');
  return {
    launcher: 'topocoll',
    rank,
    size,
    rendezvous: { kind: 'address', host, port, token: requireVar(env, 'TOPOCOLL_TOKEN'), hostedByRank0: false },
    nodeName: env.TOPOCOLL_NODE || undefined,
    configFile: env.TOPOCOLL_CONFIG || undefined,
    networkFile: env.TOPOCOLL_NETWORK || undefined,
    timeoutMs: env.TOPOCOLL_TIMEOUT_MS ? intVar(env, 'TOPOCOLL_TIMEOUT_MS') : undefined,
  };
}

function fromRanks(
  launcher: LauncherKind,
  env: NodeJS.ProcessEnv,
  rankVar: string,
  sizeVar: string,
  jobKey: string | undefined,
  multiNode: boolean,
): JobEnvironment {
  const rank = intVar(env, rankVar);
  const size = intVar(env, sizeVar);
  if (rank >= size) throw new TopocollError('ECONFIG', `${rankVar}=${rank} is not below ${sizeVar}=${size}`);
  return {
    launcher,
    rank,
    size,
    rendezvous: rendezvousFor(env, jobKey, size, multiNode, rank),
    // Under another launcher, TOPOCOLL_NODE names the node too (emulated nodes under mpirun:
    // `mpirun -np 2 -x TOPOCOLL_NODE=a app : -np 2 -x TOPOCOLL_NODE=b app`; under Hydra:
    // `mpiexec -n 2 -env TOPOCOLL_NODE a app : -n 2 -env TOPOCOLL_NODE b app`).
    nodeName: env.TOPOCOLL_NODE || undefined,
    configFile: env.TOPOCOLL_CONFIG || undefined,
  };
}

/**
 * An explicit TOPOCOLL_RENDEZVOUS (with TOPOCOLL_TOKEN) wins; else MASTER_ADDR/MASTER_PORT, where
 * rank 0 hosts the server; else, for a job on one node, a private file keyed by the launcher's
 * job id.
 */
function rendezvousFor(env: NodeJS.ProcessEnv, jobKey: string | undefined, size: number, multiNode: boolean, rank: number): RendezvousPlan {
  if (size === 1) return { kind: 'none' };
  if (env.TOPOCOLL_RENDEZVOUS) {
    const [host, port] = splitAddress(env.TOPOCOLL_RENDEZVOUS, 'TOPOCOLL_RENDEZVOUS');
    const token = requireVar(env, 'TOPOCOLL_TOKEN');
    if (env.TOPOCOLL_RENDEZVOUS_HOST_RANK0 === '1') return { kind: 'address', host, port, token, hostedByRank0: true, jobKey: `addr-${host}-${port}` };
    return { kind: 'address', host, port, token, hostedByRank0: false };
  }
  if (env.MASTER_ADDR && env.MASTER_PORT) {
    const port = intVar(env, 'MASTER_PORT');
    if (port < 1 || port > 65535) throw new TopocollError('ECONFIG', `MASTER_PORT=${port} is not a TCP port (1–65535)`, { rank });
    return {
      kind: 'address',
      host: env.MASTER_ADDR,
      port,
      token: env.TOPOCOLL_TOKEN || undefined,
      hostedByRank0: true,
      jobKey: `addr-${env.MASTER_ADDR}-${port}`,
    };
  }
  if (multiNode) {
    const error = new TopocollError('ECONFIG', 'the job spans several nodes, and no rendezvous address is set', {
      rank,
      hint: 'Set MASTER_ADDR (the host of rank 0) and MASTER_PORT (a free port there) and TOPOCOLL_TOKEN (the same random secret on every rank, e.g. from "openssl rand -hex 16") in the job\'s environment; or, under mpirun, use transport: mpi.',
    });
    return { kind: 'missing', error };
  }
  if (jobKey) return { kind: 'file', jobKey };
  const error = new TopocollError('ECONFIG', 'cannot find the other processes: no rendezvous address and no job id', {
    rank,
    hint: 'Set MASTER_ADDR and MASTER_PORT (rank 0 hosts the rendezvous there), or start the job with "topocoll run".',
  });
  return { kind: 'missing', error };
}

function requireVar(env: NodeJS.ProcessEnv, name: string): string {
  const v = env[name];
  if (v === undefined || v === '') throw new TopocollError('ECONFIG', `${name} is not set`);
  return v;
}

function intVar(env: NodeJS.ProcessEnv, name: string): number {
  const v = requireVar(env, name);
  if (!/^(0|[1-9][0-9]*)$/.test(v)) throw new TopocollError('ECONFIG', `${name}="${v}" is not a non-negative integer`);
  return Number(v);
}

function splitAddress(text: string, name: string): [string, number] {
  const m = /^(.*):(\d+)$/.exec(text);
  if (!m || m[1] === '') throw new TopocollError('ECONFIG', `${name}="${text}" is not host:port`);
  return [m[1]!.replace(/^\[(.*)\]$/, '$1'), Number(m[2])];
}
