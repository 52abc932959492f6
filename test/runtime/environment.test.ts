import { describe, expect, it } from 'vitest';
import { detectEnvironment } from '../../src/runtime/environment.js';
import { channelBytes, shmLayout } from '../../src/runtime/shm-budget.js';
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
  it('splits the budget into power-of-two channels between 16 KiB and 1 MiB', () => {
    expect(channelBytes(64 << 20, 2)).toBe(1 << 20); // the ceiling
    expect(channelBytes(8 << 20, 4)).toBe(512 << 10); // 12 channels: 683 KiB each → 512 KiB
    expect(channelBytes(64 << 20, 8)).toBe(1 << 20); // 56 channels: 1.14 MiB each → 1 MiB
    expect(channelBytes(64 << 20, 16)).toBe(256 << 10); // 240 channels: 273 KiB → 256 KiB
    expect(channelBytes(64 << 20, 128)).toBe(16 << 10); // floor
  });

  it('takes shm.channelBytes as given, and refuses one that is not a power of two or does not fit the budget', () => {
    expect(shmLayout(validateConfig({ shm: { channelBytes: 4 << 20 } }), 2, 2).channelBytes).toBe(4 << 20);
    expect(shmLayout(validateConfig({}), 2, 2).channelBytes).toBe(1 << 20);
    expect(thrown(() => parseConfig('shm:\n  channelBytes: 100000\n', 'c.yaml'), 'ECONFIG').message).toMatch(/c\.yaml:2:17: shm\.channelBytes.*power of two/);
    const tooBig = thrown(() => shmLayout(validateConfig({ shm: { budgetBytes: 8 << 20, channelBytes: 4 << 20 } }), 4, 2), 'ECONFIG');
    expect(tooBig.message).toMatch(/12 channels of 4194304 bytes\), more than shm\.budgetBytes = 8388608/);
  });

  it('puts ranks on emulated nodes in blocks, the first N mod K nodes one larger', () => {
    expect(nodeLayout(7, 3)).toEqual({ nodeOf: [0, 0, 0, 1, 1, 2, 2], localOf: [0, 1, 2, 0, 1, 0, 1], localSizes: [3, 2, 2] });
  });
});
