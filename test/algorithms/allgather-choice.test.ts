import { describe, expect, it } from 'vitest';
import { decodeSteps, StepKind } from '../../src/algorithms/schedule.js';
import { validateConfig } from '../../src/config/load.js';
import type { TopocollConfigInput } from '../../src/config/schema.js';
import { planGroups, type Group } from '../../src/groups/plan.js';
import { exchangeLimitsOf, isNodeLocal, MAX_SIZE_BUCKET, Selector, type NodeFacts } from '../../src/algorithms/selection.js';
import { CollectivePlans } from '../../src/runtime/collective-plans.js';
import { byCore, range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';

/** `allgather.levels.<level>: shm` from configuration to the registered schedules. */
const config = (input: TopocollConfigInput = {}) => validateConfig(input);
// 2 nodes × 4 ranks, 2 sockets of 2 cores: socket, node and world levels.
const plan = planGroups(byCore(['a', 'b'], 4, 2));
const groupAt = (level: string): Group => plan.groups.get(level as never)![0]!;
const inside = { socket: 'shm', node: 'shm', world: 'ring' };
const facts: NodeFacts = { cores: 4, oversubscribed: false };
const selector = (input: TopocollConfigInput, on = plan, eagerBytes = 16384) => new Selector(config(input), on, exchangeLimitsOf(eagerBytes), facts);

describe('allgather shm in the configuration', () => {
  it('is accepted at levels inside a node and chosen there, at every size', () => {
    expect(plan.levels).toEqual(['socket', 'node', 'world']);
    const s = selector({ allgather: { levels: inside } });
    for (const b of range(0, MAX_SIZE_BUCKET)) {
      const c = s.chooseBucket(b);
      expect(c.allgather(groupAt('socket'))).toBe('shm');
      expect(c.allgather(groupAt('node'))).toBe('shm');
      expect(c.allgather(groupAt('world'))).toBe('ring');
    }
  });

  it('is refused (ECONFIG naming the level and the group) at a level that spans nodes, before any choice', () => {
    const e = thrown(() => selector({ allgather: { levels: { world: 'shm' } } }), 'ECONFIG');
    expect(e.message).toMatch(/allgather\.levels\.world: shm works only inside a node, and the world group world spans nodes/);
    expect(e.message).toMatch(/ring, recursive-doubling, bruck, neighbor-exchange/);
  });

  it('the schema takes shm and still refuses bcast-only names', () => {
    expect(config({ allgather: { levels: { node: 'shm' } } }).allgather.levels.node).toBe('shm');
    thrown(() => config({ allgather: { levels: { node: 'binomial' } } }), 'ECONFIG');
  });

  it('gather segments are bounded by the eager limit only where a group still exchanges', () => {
    const onlyShm = planGroups(byCore(['a'], 4, 2));
    const c = selector({ allgather: { levels: { socket: 'shm', node: 'shm' }, segment: '1MiB' } }, onlyShm);
    expect(c.choose(64 << 20).segmentBytes.allgather).toBe(1048576);
    const mixed = selector({ allgather: { levels: inside, segment: '1MiB' } });
    expect(mixed.choose(64 << 20).segmentBytes.allgather).toBe(16384);
  });

  it('registers gather schedules of ShmBcast rank blocks in the node-local groups, with their engine ids', () => {
    const ids = new Map(
      [...plan.groups.values()]
        .flat()
        .filter((g) => isNodeLocal(plan, g))
        .map((g, i) => [g, 10 + i]),
    );
    const registered: Int32Array[] = [];
    const plans = new CollectivePlans({
      plan,
      orderedPlan: plan,
      rank: 1,
      config: config({ allgather: { levels: inside } }),
      shmGroups: ids,
      exchangeLimits: exchangeLimitsOf(16384),
      oversubscribed: false,
      cores: 4,
      register: (encoded) => registered.push(encoded) - 1,
    });
    const call = plans.allgather(64, 4, 16);
    const steps = decodeSteps(registered[call.gather]!);
    const socket = plan.chain(1).find((g) => g.level === 'socket')!;
    const node = plan.groups.get('node' as never)![0]!;
    // rank 1's socket group {0, 1}, then its node group {0, 2} of the socket leaders: rank 1 is in the socket group only
    expect(socket.members).toEqual([0, 1]);
    expect(plan.chain(1)).toEqual([socket]);
    expect(node.members).not.toContain(1);
    expect(steps).toEqual([0, 1].map((r) => ({ kind: StepKind.ShmBcast, peer: r, level: 0, group: ids.get(socket), range: { first: r, count: 1, of: 0 } })));
    expect(plans.describe(socket).allgather).toEqual([{ upToBytes: null, algorithm: 'shm' }]);
  });
});
