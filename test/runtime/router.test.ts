import { describe, expect, it } from 'vitest';
import { exchangeLimitsOf } from '../../src/algorithms/selection.js';
import { validateConfig } from '../../src/config/load.js';
import type { TopocollConfigInput } from '../../src/config/schema.js';
import { planGroups } from '../../src/groups/plan.js';
import { CollectivePlans } from '../../src/runtime/collective-plans.js';
import { Router, windowThresholds } from '../../src/runtime/router.js';
import type { Windows } from '../../src/runtime/windows.js';
import type { RankPlacement } from '../../src/topology/types.js';
import type { TypedArray } from '../../src/util/typed-array.js';
import { byCore } from '../helpers/placements.js';

/**
 * The router (src/runtime/router.ts) as a function of the configuration, the plans and the
 * buffers' kind: its per-call answers, and the table explain() prints from the same numbers.
 */

/** Arrays that stand for shared windows: in `window`, each its own part at offset 0. */
function fakeWindows(window: readonly TypedArray[]): Windows {
  const of = (a: TypedArray) => (window.includes(a) ? { id: window.indexOf(a) } : undefined);
  return {
    windowOf: of,
    placeOf: (a: TypedArray) => (window.includes(a) ? { id: window.indexOf(a), offset: 0 } : undefined),
  } as unknown as Windows;
}

function routerFor(
  placed: RankPlacement[],
  input: TopocollConfigInput = {},
  options: { oversubscribed?: boolean; fastPathAvailable?: boolean; windows?: TypedArray[] } = {},
): Router {
  const config = validateConfig(input);
  const plan = planGroups(placed);
  const perNode = placed.filter((x) => x.node === placed[0]!.node).length;
  const oversubscribed = options.oversubscribed ?? false;
  const plans = new CollectivePlans({
    plan,
    orderedPlan: plan,
    rank: 0,
    config,
    shmGroups: new Map(),
    exchangeLimits: exchangeLimitsOf(Infinity),
    oversubscribed,
    cores: oversubscribed ? Math.max(1, perNode >> 1) : perNode,
    register: () => 0,
  });
  return new Router({
    config,
    plans,
    windows: fakeWindows(options.windows ?? []),
    fastPathAvailable: options.fastPathAvailable ?? true,
    oversubscribed,
    size: placed.length,
  });
}

const oneNode = byCore(['a'], 4, 4);
const twoNodes = byCore(['a', 'b'], 2, 2);

describe('the router', () => {
  it('sends small blocking calls of a one-node job to the fast path up to the profile sizes', () => {
    const r = routerFor(oneNode);
    const { copyMaxBytes, combineMaxBytes } = validateConfig({}).routing.fastPath;
    expect([r.fastBcast(copyMaxBytes), r.fastBcast(copyMaxBytes + 1)]).toEqual([true, false]);
    expect([r.fastAllgather(copyMaxBytes), r.fastAllgather(copyMaxBytes + 1)]).toEqual([true, false]);
    expect([r.fastAllreduce(combineMaxBytes), r.fastAllreduce(combineMaxBytes + 1)]).toEqual([true, false]);
    expect([r.fastReduce(combineMaxBytes), r.fastReduce(combineMaxBytes + 1)]).toEqual([true, false]);
    expect(r.fastBarrier()).toBe(true);
  });

  it('takes its thresholds from the configuration', () => {
    const r = routerFor(oneNode, { routing: { fastPath: { copyMaxBytes: 256, combineMaxBytes: 8 } } });
    expect([r.fastBcast(256), r.fastBcast(257), r.fastAllreduce(8), r.fastAllreduce(16)]).toEqual([true, false, true, false]);
  });

  it('never sends a call to the fast path where it cannot run or is switched off', () => {
    for (const r of [
      routerFor(oneNode, {}, { fastPathAvailable: false }),
      routerFor(oneNode, { collectives: { jsFastPath: false } }),
      routerFor(twoNodes, {}, { fastPathAvailable: false }),
    ]) {
      expect([r.fastBcast(0), r.fastReduce(0), r.fastAllreduce(0), r.fastAllgather(0), r.fastBarrier()]).toEqual([false, false, false, false, false]);
    }
    // The one-node area off for allreduces: neither the fast path's allreduce nor its barrier.
    const noArea = routerFor(oneNode, { allreduce: { shm: false } });
    expect([noArea.fastAllreduce(8), noArea.fastBarrier()]).toEqual([false, false]);
  });

  it('runs calls on windows single-copy from the thresholds of the node kind', () => {
    const MiB = 1 << 20;
    const big = new Float64Array(MiB / 8);
    const small = new Float64Array(1024);
    const ordinary = new Float64Array(MiB / 8);
    const dedicated = windowThresholds(validateConfig({}).routing, false);
    const shared = windowThresholds(validateConfig({}).routing, true);
    expect(shared.bcast).toBeGreaterThan(dedicated.bcast);
    const r = routerFor(oneNode, {}, { windows: [big, small] });
    expect([r.windowBcast(big), r.windowBcast(small), r.windowBcast(ordinary)]).toEqual([true, false, false]);
    expect([r.windowAllreduce(big, big), r.windowAllreduce(ordinary, big), r.windowAllreduce(small, small)]).toEqual([true, false, false]);
    expect([r.windowAllgather(big, dedicated.allgather), r.windowAllgather(big, dedicated.allgather - 1), r.windowAllgather(ordinary, MiB)]).toEqual([
      true,
      false,
      false,
    ]);
    const bcastBetween = new Uint8Array(dedicated.bcast);
    const crowded = routerFor(oneNode, {}, { oversubscribed: true, windows: [bcastBetween] });
    expect(crowded.windowBcast(bcastBetween)).toBe(false);
    expect(routerFor(oneNode, {}, { windows: [bcastBetween] }).windowBcast(bcastBetween)).toBe(true);
  });

  it('tags one-sided bcasts of window parts only with bcast.algorithm one-sided', () => {
    const part = new Float64Array(16);
    expect(routerFor(oneNode, {}, { windows: [part] }).oneSidedTag(part)).toBeUndefined();
    const r = routerFor(oneNode, { bcast: { algorithm: 'one-sided' } }, { windows: [part] });
    expect(r.oneSidedTag(part)).toEqual(expect.any(Number));
    expect(r.oneSidedTag(new Float64Array(16))).toBeUndefined();
  });

  it('prints the same answers in its table (explain().route)', () => {
    const r = routerFor(oneNode);
    expect(r.route('allreduce', 8)).toEqual({ memory: { sync: 'fast', async: 'shared-area' }, window: { sync: 'fast', async: 'shared-area' } });
    expect(r.route('allreduce', 4096)).toEqual({
      memory: { sync: 'shared-area', async: 'shared-area' },
      window: { sync: 'shared-area', async: 'shared-area' },
    });
    expect(r.route('allreduce', 1 << 20)).toEqual({ memory: { sync: 'levels', async: 'levels' }, window: { sync: 'window', async: 'window' } });
    expect(r.route('bcast', 1 << 20).window).toEqual({ sync: 'window', async: 'window' });
    expect(r.route('barrier', 0).memory).toEqual({ sync: 'fast', async: 'shared-area' });
    // An allgather by its whole result: blocks of copyMaxBytes from each of the 4 ranks still take the fast path.
    const { copyMaxBytes } = validateConfig({}).routing.fastPath;
    expect(r.route('allgather', 4 * copyMaxBytes).memory.sync).toBe('fast');
    expect(r.route('allgather', 4 * copyMaxBytes + 4).memory.sync).not.toBe('fast');
    // Across nodes: no fast path, no shared area, no window allreduce or allgather.
    const across = routerFor(twoNodes, {}, { fastPathAvailable: false });
    expect(across.route('allreduce', 1 << 20)).toEqual({ memory: { sync: 'levels', async: 'levels' }, window: { sync: 'levels', async: 'levels' } });
    expect(across.route('bcast', 1 << 20).window).toEqual({ sync: 'window', async: 'window' });
    expect(routerFor(oneNode, { bcast: { algorithm: 'one-sided' } }).route('bcast', 8).window).toEqual({ sync: 'one-sided', async: 'one-sided' });
  });

  it('sends gather, scatter, alltoall, reduce-scatter and the scans of one node through the area (blocking ones to the fast path up to its sizes), never to windows', () => {
    const route = (sync: string, async: string) => ({ memory: { sync, async }, window: { sync, async } });
    const one = routerFor(oneNode);
    // Copies up to copyMaxBytes (gather: per rank's block), combines up to combineMaxBytes.
    for (const [collective, fastUpTo] of [
      ['gather', 1024 * oneNode.length],
      ['scatter', 1024],
      ['alltoall', 1024],
      ['reduce-scatter', 64],
      ['scan', 64],
      ['exscan', 64],
    ] as const) {
      expect(one.route(collective, fastUpTo)).toEqual(route('fast', 'shared-area'));
      expect(one.route(collective, fastUpTo + oneNode.length * 8)).toEqual(route('shared-area', 'shared-area'));
      expect(one.route(collective, 8192)).toEqual(route('shared-area', 'shared-area'));
      expect(one.route(collective, 8192 + 64)).toEqual(route('levels', 'levels'));
    }
    // Several nodes, more ranks than cores, or the algorithms configured: the levels.
    for (const r of [
      routerFor(twoNodes, {}, { fastPathAvailable: false }),
      routerFor(oneNode, {}, { oversubscribed: true }),
      routerFor(oneNode, { gather: { levels: { node: 'flat' } }, scatter: { levels: { node: 'flat' } }, alltoall: { algorithm: 'pairwise' } }),
    ])
      for (const collective of ['gather', 'scatter', 'alltoall'] as const)
        for (const bytes of [8, 4096, 1 << 20]) expect(r.route(collective, bytes)).toEqual(route('levels', 'levels'));
    for (const r of [routerFor(twoNodes, {}, { fastPathAvailable: false }), routerFor(oneNode, { reduceScatter: { top: 'ring' }, allreduce: { shm: false } })])
      for (const collective of ['reduce-scatter', 'scan', 'exscan'] as const)
        for (const bytes of [8, 4096, 1 << 20]) expect(r.route(collective, bytes)).toEqual(route('levels', 'levels'));
  });
});
