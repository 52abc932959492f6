import { describe, expect, it } from 'vitest';
import { detectEnvironment } from '../../src/runtime/environment.js';
import { shmLayout } from '../../src/runtime/shm-budget.js';
import { autoShmBudgetBytes } from '../../src/topology/node-memory.js';
import { parseConfig, validateConfig } from '../../src/config/load.js';
import { nodeLayout } from '../../src/cli/launcher.js';
import { thrown } from '../helpers/thrown.js';

describe('detectEnvironment, in the order of architecture §2.1', () => {
  it('the topocoll launcher wins over everything else', () => {
    const job = detectEnvironment({
      TOPOCOLL_RANK: '3',
      TOPOCOLL_SIZE: '8',
      TOPOCOLL_RENDEZVOUS: '127.0.0.1:4000',
      TOPOCOLL_TOKEN: 'tok',
      TOPOCOLL_NODE: 'node1',
      TOPOCOLL_TIMEOUT_MS: '5000',
      OMPI_COMM_WORLD_RANK: '0',
      OMPI_COMM_WORLD_SIZE: '2',
    });
    expect(job).toMatchObject({ launcher: 'topocoll', rank: 3, size: 8, nodeName: 'node1', timeoutMs: 5000 });
    expect(job.rendezvous).toEqual({ kind: 'address', host: '127.0.0.1', port: 4000, token: 'tok', hostedByRank0: false });
  });

  it('Open MPI: ranks from OMPI_COMM_WORLD_*, rendezvous in a private file keyed by the PMIx namespace', () => {
    const job = detectEnvironment({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '4', PMIX_NAMESPACE: 'prterun-vm-123@1' });
    expect(job).toMatchObject({ launcher: 'openmpi', rank: 1, size: 4, rendezvous: { kind: 'file', jobKey: 'ompi-prterun-vm-123@1' } });
    expect(job.nodeName).toBeUndefined();
    // TOPOCOLL_NODE names the node under any launcher (emulated nodes under mpirun).
    expect(detectEnvironment({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '4', PMIX_NAMESPACE: 'p@1', TOPOCOLL_NODE: 'b' }).nodeName).toBe('b');
  });

  it("MPICH's Hydra: ranks from PMI_RANK/PMI_SIZE with MPI_LOCALNRANKS, rendezvous in a private file keyed by the node's hydra_pmi_proxy", () => {
    const hydra = { PMI_RANK: '2', PMI_SIZE: '4', PMI_FD: '6', MPI_LOCALRANKID: '2', MPI_LOCALNRANKS: '4' };
    const proxy = () => ({ pid: 4242, command: 'hydra_pmi_proxy' });
    expect(detectEnvironment(hydra, proxy)).toMatchObject({ launcher: 'mpich', rank: 2, size: 4, rendezvous: { kind: 'file', jobKey: 'mpich-4242' } });
    expect(detectEnvironment({ ...hydra, TOPOCOLL_NODE: 'b' }, proxy).nodeName).toBe('b');
    // A parent that is not the proxy (a shell that did not exec): no job key, so a one-node job needs an address.
    const shell = () => ({ pid: 4243, command: 'sh' });
    expect(detectEnvironment(hydra, shell).rendezvous).toMatchObject({ kind: 'missing', error: { code: 'ECONFIG' } });
    expect(detectEnvironment({ ...hydra, MASTER_ADDR: 'h', MASTER_PORT: '29500' }, shell).rendezvous).toMatchObject({ kind: 'address', hostedByRank0: true });
    // Fewer ranks on this node than in the job: several nodes, which need an address (or transport: mpi).
    const across = detectEnvironment({ ...hydra, MPI_LOCALNRANKS: '2' }, proxy).rendezvous;
    expect(across).toMatchObject({ kind: 'missing', error: { code: 'ECONFIG', message: expect.stringMatching(/spans several nodes/) as unknown } });
    expect(thrown(() => detectEnvironment({ ...hydra, PMI_RANK: '4' }, proxy), 'ECONFIG').message).toMatch(/PMI_RANK=4 is not below PMI_SIZE=4/);
  });

  it('Hydra after Open MPI and before Slurm; srun --mpi=pmi2 (PMI_RANK without MPI_LOCALNRANKS) stays Slurm', () => {
    const proxy = () => ({ pid: 7, command: 'hydra_pmi_proxy' });
    const hydra = { PMI_RANK: '1', PMI_SIZE: '2', MPI_LOCALRANKID: '1', MPI_LOCALNRANKS: '2' };
    expect(detectEnvironment({ ...hydra, OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '3', PMIX_NAMESPACE: 'p@1' }, proxy).launcher).toBe('openmpi');
    // mpiexec inside a Slurm allocation: the ranks inherit the proxy's SLURM_PROCID (0 on every rank of a node).
    const inAllocation = { ...hydra, SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_ID: '77' };
    expect(detectEnvironment(inAllocation, proxy)).toMatchObject({ launcher: 'mpich', rank: 1, size: 2 });
    const pmi2 = { PMI_RANK: '1', PMI_SIZE: '2', PMI_FD: '5', PMI_JOBID: '77.0', SLURM_PROCID: '1', SLURM_NTASKS: '2', SLURM_JOB_ID: '77' };
    expect(detectEnvironment(pmi2, proxy)).toMatchObject({ launcher: 'slurm', rank: 1, size: 2 });
    // PMI_RANK alone (another PMI launcher) is none of these.
    expect(detectEnvironment({ PMI_RANK: '1', PMI_SIZE: '2' }, proxy).launcher).toBe('single');
  });

  it('Open MPI or Slurm across nodes without an address: the ECONFIG init() over TCP throws, naming the variables to set', () => {
    const missing = (env: NodeJS.ProcessEnv) => {
      const plan = detectEnvironment(env).rendezvous;
      if (plan.kind !== 'missing') throw new Error(`expected no rendezvous, got ${plan.kind}`);
      expect(plan.error.code).toBe('ECONFIG');
      return plan.error.message + ' ' + (plan.error.hint ?? '');
    };
    const ompi = { OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '4', OMPI_COMM_WORLD_LOCAL_SIZE: '2', PMIX_NAMESPACE: 'x@1' };
    expect(missing(ompi)).toMatch(/spans several nodes.*MASTER_ADDR.*TOPOCOLL_TOKEN.*transport: mpi/);
    const slurm = { SLURM_PROCID: '0', SLURM_NTASKS: '4', SLURM_JOB_ID: '77', SLURM_STEP_NUM_NODES: '2' };
    missing(slurm);
    expect(missing({ RANK: '0', WORLD_SIZE: '2' })).toMatch(/no rendezvous address and no job id/);
    expect(detectEnvironment({ ...slurm, SLURM_STEP_NUM_NODES: '1' }).rendezvous).toEqual({ kind: 'file', jobKey: 'slurm-77.0' });
  });

  it('Slurm, with MASTER_ADDR/MASTER_PORT: rank 0 hosts; without TOPOCOLL_TOKEN no token is derived (rank 0 makes one)', () => {
    const env = { SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_ID: '77', MASTER_ADDR: 'n01', MASTER_PORT: '29500' };
    expect(detectEnvironment(env).rendezvous).toEqual({
      kind: 'address',
      host: 'n01',
      port: 29500,
      token: undefined,
      hostedByRank0: true,
      jobKey: 'addr-n01-29500',
    });
    expect(detectEnvironment({ ...env, TOPOCOLL_TOKEN: 'secret' }).rendezvous).toMatchObject({ token: 'secret' });
    thrown(() => detectEnvironment({ ...env, MASTER_PORT: '70000' }), 'ECONFIG');
  });

  it('torchrun convention, and a world of one otherwise', () => {
    expect(detectEnvironment({ RANK: '2', WORLD_SIZE: '4', MASTER_ADDR: 'h', MASTER_PORT: '1', TOPOCOLL_TOKEN: 'x' })).toMatchObject({
      launcher: 'torchrun',
      rank: 2,
      size: 4,
      rendezvous: { kind: 'address', token: 'x' },
    });
    expect(detectEnvironment({})).toEqual({ launcher: 'single', rank: 0, size: 1, rendezvous: { kind: 'none' } });
  });

  it('rejects inconsistent or malformed variables with ECONFIG', () => {
    expect(thrown(() => detectEnvironment({ RANK: '4', WORLD_SIZE: '4', MASTER_ADDR: 'h', MASTER_PORT: '1' }), 'ECONFIG').message).toMatch(
      /RANK=4 is not below WORLD_SIZE=4/,
    );
    thrown(() => detectEnvironment({ TOPOCOLL_RANK: 'x', TOPOCOLL_SIZE: '2' }), 'ECONFIG');
    thrown(() => detectEnvironment({ TOPOCOLL_RANK: '0', TOPOCOLL_SIZE: '2', TOPOCOLL_RENDEZVOUS: 'nohost', TOPOCOLL_TOKEN: 't' }), 'ECONFIG');
  });
});

describe('shared-memory budget and emulated node layout', () => {
  it('lays a node segment out linearly in its ranks: per rank a bcast queue and an outbox, no per-pair part', () => {
    // The defaults on a node with 512 GiB of memory and /dev/shm (its auto budget: 256 GiB), so
    // that every size fits whatever this machine has.
    const node = { devShmBytes: 512 * 2 ** 30, memoryBytes: 512 * 2 ** 30 };
    const config = validateConfig({ shm: { budgetBytes: autoShmBudgetBytes(node) } });
    const sizes = Array.from({ length: 1024 }, (_, i) => i + 1);
    const segment = sizes.map((p) => shmLayout(config, p, 2).segmentBytes);
    expect(segment[0]).toBe(0); // alone on its node: no segment
    const layout = shmLayout(config, 8, 2);
    // The largest channel is what the per-pair layout had (every pair's ring within 48 MiB):
    // 1 MiB up to 7 ranks, 512 KiB at 8, 128 KiB at 16, 64 KiB from 21; the outbox holds one of
    // 1 MiB to each peer of an 8-rank node, and the smallest to each of 127.
    expect([2, 7, 8, 10, 11, 16, 20, 21, 128].map((p) => shmLayout(config, p, 2).channelBytes / 1024)).toEqual([1024, 1024, 512, 512, 256, 128, 128, 64, 64]);
    expect(layout).toMatchObject({ channelBytes: 512 << 10, channelMinBytes: 64 << 10 });
    expect(layout.channelPoolBytes).toBeGreaterThanOrEqual(7 * ((1 << 20) + 4096));
    expect(layout.channelPoolBytes).toBeGreaterThanOrEqual(4096 + 127 * ((64 << 10) + 512));
    // Linear: each added rank costs the same (up to the page rounding of the rank controls and
    // the shared area), from 2 to 1024 ranks.
    const perRank = (segment[1023]! - segment[1]!) / 1022;
    for (let p = 3; p <= 1024; p++) {
      const step = segment[p - 1]! - segment[p - 2]!;
      expect(Math.abs(step - perRank)).toBeLessThanOrEqual(64 << 10);
    }
    // And bounded per rank: the outbox, the queue and their controls, well under 10 MiB.
    expect(perRank).toBeGreaterThan(layout.channelPoolBytes + layout.bcast.queueBytes);
    expect(perRank).toBeLessThan(10 << 20);
    expect(segment[127]!).toBeLessThan(128 * (10 << 20));
  });

  it('takes the budget from the node: half of the smaller of /dev/shm and its memory', () => {
    expect(autoShmBudgetBytes({ devShmBytes: 12 * 2 ** 30, memoryBytes: 24 * 2 ** 30 })).toBe(6 * 2 ** 30);
    expect(autoShmBudgetBytes({ devShmBytes: Infinity, memoryBytes: 8 * 2 ** 30 })).toBe(4 * 2 ** 30);
    // The default is this node's, and an explicit one wins.
    expect(validateConfig({}).shm.budgetBytes).toBe(autoShmBudgetBytes());
    expect(validateConfig({ shm: { budgetBytes: 64 << 20 } }).shm.budgetBytes).toBe(64 << 20);
  });

  it('takes shm.channelBytes as given, shrinks auto outboxes to an explicit budget, and refuses a segment over it', () => {
    expect(shmLayout(validateConfig({ shm: { channelBytes: 4 << 20 } }), 2, 2).channelBytes).toBe(4 << 20);
    expect(shmLayout(validateConfig({}), 2, 2).channelBytes).toBe(1 << 20);
    expect(thrown(() => parseConfig('shm:\n  channelBytes: 100000\n', 'c.yaml'), 'ECONFIG').message).toMatch(/c\.yaml:2:17: shm\.channelBytes.*power of two/);
    // 48 ranks within the 64 MiB that used to be the default: smaller outboxes, still starts.
    const small = shmLayout(validateConfig({ shm: { budgetBytes: 64 << 20 } }), 48, 2);
    expect(small.channelPoolBytes).toBeLessThan(8 << 20);
    expect(small.channelPoolBytes).toBeGreaterThanOrEqual(64 << 10);
    expect(small.segmentBytes).toBeLessThanOrEqual(64 << 20);
    const tooBig = thrown(() => shmLayout(validateConfig({ shm: { budgetBytes: 8 << 20, channelPoolBytes: 4 << 20 } }), 4, 2), 'ECONFIG');
    expect(tooBig.message).toMatch(
      /needs \d+ bytes for 4 ranks \(per rank: a bcast queue of \d+ bytes and an outbox of 4194304 bytes.*more than shm\.budgetBytes = 8388608/,
    );
    const noChannel = thrown(() => shmLayout(validateConfig({ shm: { channelPoolBytes: 65536 } }), 4, 2), 'ECONFIG');
    expect(noChannel.message).toMatch(/shm\.channelPoolBytes = 65536 cannot hold one channel of 65536 bytes/);
  });

  it('puts ranks on emulated nodes in blocks, the first N mod K nodes one larger', () => {
    expect(nodeLayout(7, 3)).toEqual({ nodeOf: [0, 0, 0, 1, 1, 2, 2], localOf: [0, 1, 2, 0, 1, 0, 1], localSizes: [3, 2, 2] });
  });
});
