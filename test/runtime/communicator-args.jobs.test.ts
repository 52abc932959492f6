import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/communicator.js';
import { IN_PLACE } from '../../src/communicator.js';
import { userOp } from '../../src/runtime/datatypes.js';
import { TopocollError } from '../../src/errors.js';
import { init } from '../../src/init.js';
import { thrown } from '../helpers/thrown.js';
import { jobScript, runJob } from '../helpers/jobs.js';

/** Argument checks happen before anything is sent; a world of one needs no launcher. */
describe('a communicator of one process', () => {
  let comm: Communicator;
  beforeAll(async () => {
    comm = await init({ env: { PATH: process.env.PATH } });
  });
  afterAll(() => comm.close());

  it('is a world of one whose collectives copy or keep the data', async () => {
    expect([comm.rank, comm.size, comm.localRank, comm.localSize]).toEqual([0, 1, 0, 1]);
    const out = new Int32Array(3);
    comm.allreduceSync(Int32Array.of(1, -2, 3), out, 'sum');
    expect([...out]).toEqual([1, -2, 3]);
    const logical = new Uint8Array(3);
    comm.allreduceSync(Uint8Array.of(0, 7, 1), logical, 'land');
    expect([...logical]).toEqual([0, 1, 1]);
    const buf = Float64Array.of(1.5);
    await comm.bcast(buf, 0);
    expect(buf[0]).toBe(1.5);
    comm.barrierSync();
    await comm.barrier();
    expect(comm.levels()).toEqual([{ name: 'node', enabled: true, groupSize: 1, isLeader: true }]);
  });

  it('rejects bad roots, buffers and operators with EINVAL', () => {
    const a = new Float64Array(4);
    expect(thrown(() => comm.bcastSync(a, 1), 'EINVAL').message).toMatch(/root 1 is not a rank of this communicator \(0…0\)/);
    thrown(() => comm.bcastSync(a, -1), 'EINVAL');
    thrown(() => comm.bcastSync(a, 0.5), 'EINVAL');
    expect(thrown(() => comm.bcastSync([1, 2] as unknown as Float64Array), 'EINVAL').message).toMatch(/must be a TypedArray.*got Array/);
    thrown(() => comm.bcastSync(new DataView(new ArrayBuffer(8)) as unknown as Float64Array), 'EINVAL');
    expect(thrown(() => comm.allreduceSync(new Float32Array(4), a), 'EINVAL').message).toMatch(/send is float32 but recv is float64/);
    expect(thrown(() => comm.allreduceSync(new Float64Array(3), a), 'EINVAL').message).toMatch(/send has 3 elements but recv has 4/);
    expect(thrown(() => comm.allreduceSync(a, new Float64Array(4), 'band'), 'EINVAL').message).toMatch(/band is for integer types, not float64/);
    expect(thrown(() => comm.allreduceSync(a, new Float64Array(4), 'avg' as 'sum'), 'EINVAL').message).toMatch(/unknown reduction operator "avg"/);
    expect(thrown(() => comm.reduceSync(a, null, 'sum', 0), 'EINVAL').message).toMatch(/root of a reduce needs a receive buffer/);
    const whole = new Int32Array(8);
    expect(thrown(() => comm.allreduceSync(whole.subarray(0, 4), whole.subarray(2, 6)), 'EINVAL').message).toMatch(/overlap.*IN_PLACE/);
    // Adjacent views of one buffer do not overlap and are fine.
    comm.allreduceSync(whole.subarray(0, 4), whole.subarray(4, 8));
    // The same array as send and recv without IN_PLACE, and a partial overlap checked by the
    // addon from the addresses; both name the rank.
    expect(thrown(() => comm.allreduceSync(whole, whole), 'EINVAL').message).toMatch(/overlap.*rank 0.*IN_PLACE/);
    expect(thrown(() => comm.reduceSync(whole.subarray(1, 5), whole.subarray(0, 4), 'sum', 0), 'EINVAL').message).toMatch(/overlap.*IN_PLACE.*rank 0/);
    // A view of the start of recv is not IN_PLACE (the addon sees the same address).
    expect(thrown(() => comm.allgatherSync(whole.subarray(0, 2), whole), 'EINVAL').message).toMatch(/overlap.*IN_PLACE/);
    // A typed array whose class name is faked: its element size is what the addon trusts.
    const fake = new Uint8Array(8);
    Object.defineProperty(fake, Symbol.toStringTag, { value: 'Float64Array' });
    expect(thrown(() => comm.allreduceSync(new Float64Array(8), fake as unknown as Float64Array), 'EINVAL').message).toMatch(
      /send is float64 but recv is uint8/,
    );
    class Posing extends Uint8Array {}
    Object.defineProperty(Posing.prototype, Symbol.toStringTag, { get: () => 'Float64Array' });
    expect(thrown(() => comm.allgatherSync(new Float64Array(8), new Posing(8) as unknown as Float64Array), 'EINVAL').message).toMatch(
      /send is float64 but recv is uint8/,
    );
  });

  it('refuses a TypedArray that claims more elements than its memory holds, in the addon', () => {
    class Lying extends Int32Array {
      override get length(): number {
        return 1 << 20;
      }
    }
    const liar = new Lying(4);
    expect(thrown(() => comm.bcastSync(liar, 0), 'EINVAL').message).toMatch(/smaller than the call's 1048576 elements/);
    expect(thrown(() => comm.allreduceSync(liar, new Lying(4), 'sum'), 'EINVAL').message).toMatch(/smaller than the call/);
  });

  it('takes non-commutative user operators (one rank is in rank order), and reports one that throws', () => {
    const out = new Float64Array(2);
    comm.allreduceSync(
      Float64Array.of(3, 4),
      out,
      userOp((a: number, b: number) => a - b, { commutative: false }),
    );
    expect([...out]).toEqual([3, 4]);
    // Alone, nothing is combined; the operator is not called at all.
    comm.allreduceSync(
      Float64Array.of(1, 2),
      out,
      userOp(
        () => {
          throw new Error('boom');
        },
        { commutative: true },
      ),
    );
    expect([...out]).toEqual([1, 2]);
  });

  it('rejects the Promise instead of throwing', async () => {
    await expect(comm.allreduce(new Float64Array(2), new Float64Array(3))).rejects.toBeInstanceOf(TopocollError);
    await expect(comm.reduce(IN_PLACE, new Float64Array(2), 'max', 0)).resolves.toBeUndefined();
  });
});

describe('after close()', () => {
  it('every collective fails with ECLOSED and close() is idempotent', async () => {
    const comm = await init({ env: { PATH: process.env.PATH } });
    comm.close();
    comm.close();
    thrown(() => comm.barrierSync(), 'ECLOSED');
    thrown(() => comm.allreduceSync(new Int8Array(1), new Int8Array(1)), 'ECLOSED');
    await expect(comm.bcast(new Int8Array(1))).rejects.toMatchObject({ code: 'ECLOSED' });
    thrown(() => comm.scanSync(new Int8Array(1), new Int8Array(1)), 'ECLOSED');
    thrown(() => comm.iexscan(new Int8Array(1), new Int8Array(1)), 'ECLOSED');
    await expect(comm.exscan(IN_PLACE, new Int8Array(1), 'max')).rejects.toMatchObject({ code: 'ECLOSED' });
  });
});

describe('argument errors in a real job', () => {
  // One job (test/jobs/bad-args.mjs) answers every test here: run once, on first use.
  let job: ReturnType<typeof runJob> | undefined;
  const badArgs = () => (job ??= runJob(['-n', '3', '--nodes', '2', jobScript('bad-args.mjs')]));

  it('IN_PLACE on a non-root rank is EINVAL before anything is sent: the job goes on', () => {
    const r = badArgs();
    expect(r.status).toBe(0);
    const lines = r.lines.filter((l) => !/operator|abort|finished|refused|alltoall/.test(l)).sort();
    expect(lines).toEqual(['rank 0 ok', 'rank 1 caught EINVAL', 'rank 1 ok', 'rank 2 caught EINVAL', 'rank 2 ok']);
  });

  it("issue 40's argument errors (alltoall, alltoallv, the reduce-scatters, scan, exscan, gather's IN_PLACE) are EINVAL in every form before anything is sent: a correct alltoall and alltoallv after them give every rank its blocks", () => {
    const r = badArgs();
    expect(r.status).toBe(0);
    // 17 mistakes × 3 forms on every rank.
    expect(r.lines.filter((l) => /refused/.test(l)).sort()).toEqual(['rank 0 refused 51', 'rank 1 refused 51', 'rank 2 refused 51']);
    expect(r.lines.filter((l) => /alltoall ok/.test(l)).sort()).toEqual(['rank 0 alltoall ok', 'rank 1 alltoall ok', 'rank 2 alltoall ok']);
  });

  it('a user operator that throws mid-collective fails that collective on every rank', () => {
    const r = badArgs();
    const outcome = r.lines.filter((l) => /operator|abort|finished/.test(l));
    expect(outcome).toHaveLength(3);
    expect(outcome.some((l) => /caught EINVAL operator$/.test(l))).toBe(true);
    for (const l of outcome) expect(l).toMatch(/caught (EINVAL|EPEERLOST) (operator|abort)$/);
  });
});
