import { describe, expect, it } from 'vitest';
import { planGroups } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { planToJson } from '../../src/groups/plan-json.js';
import { parseSimpleNetworkFile } from '../../src/topology/network/simple-file.js';
import type { TopocollErrorCode } from '../../src/errors.js';
import { thrown } from '../helpers/thrown.js';
import { byCore, coreLocality, pad, range } from '../helpers/placements.js';

function expectError(fn: () => unknown, code: TopocollErrorCode, text: RegExp): void {
  expect(thrown(fn, code).message).toMatch(text);
}

describe('the seed example (S3): 64 nodes × 2 sockets × 18 cores, 16 nodes per leaf switch', () => {
  const nodes = range(1, 64).map((i) => `node${pad(i)}`);
  const networkText = nodes.map((n, i) => `${n} sw1${Math.floor(i / 16) + 1} sw21`).join('\n');
  const network = parseSimpleNetworkFile(networkText, 'net.txt');
  const plan = planGroups(byCore(nodes, 36, 18), { network });
  const members = (rank: number) => plan.chain(rank).map((g) => g.members);

  it('keeps socket, node, leaf and spine levels and no world (one spine)', () => {
    expect(plan.levels).toEqual(['socket', 'node', 'switch1', 'switch2']);
  });

  it('gives ranks 0, 1, 36 and 54 exactly the groups of the worked example', () => {
    expect(members(0)).toEqual([range(0, 17), [0, 18], range(0, 540, 36), [0, 576, 1152, 1728]]);
    expect(members(1)).toEqual([range(0, 17)]);
    expect(members(36)).toEqual([range(36, 53), [36, 54], range(0, 540, 36)]);
    expect(members(54)).toEqual([range(54, 71), [36, 54]]);
  });

  it('matches an arithmetic reference for every rank', () => {
    for (let r = 0; r < 64 * 36; r++) {
      const node = Math.floor(r / 36);
      const socketBase = r - (r % 18);
      const nodeBase = node * 36;
      const leafBase = Math.floor(node / 16) * 16 * 36;
      const expected: number[][] = [range(socketBase, socketBase + 17)];
      if (r === socketBase) expected.push([nodeBase, nodeBase + 18]);
      if (r === nodeBase) expected.push(range(leafBase, leafBase + 15 * 36, 36));
      if (r === leafBase) expected.push([0, 576, 1152, 1728]);
      expect(members(r)).toEqual(expected);
      for (const g of plan.chain(r)) expect(g.leader).toBe(g.members[0]);
    }
  });

  it('reports why numa and l3 carry no groups (same as socket) and why core, l1, l2 do not', () => {
    const onNode1 = plan.dropped.filter((d) => d.node === 'node01');
    expect(onNode1.map((d) => [d.level, d.reason])).toEqual([
      ['core', 'every core unit holds one rank'],
      ['l1', 'every l1 unit holds one rank'],
      ['l2', 'every l2 unit holds one rank'],
      ['l3', 'same groups as socket'],
      ['numa', 'same groups as socket'],
    ]);
  });

  it('switching the socket level off gives NM-ND-SW style groups: node groups of 36', () => {
    const off = planGroups(byCore(nodes, 36, 18), { network, disabled: ['socket'] });
    expect(off.levels).toEqual(['numa', 'node', 'switch1', 'switch2']);
    expect(off.chain(0).map((g) => g.level)).toEqual(['numa', 'node', 'switch1', 'switch2']);
    const offAll = planGroups(byCore(nodes, 36, 18), { network, disabled: ['socket', 'l3', 'numa'] });
    expect(offAll.chain(0).map((g) => g.members)).toEqual([range(0, 35), range(0, 540, 36), [0, 576, 1152, 1728]]);
  });
});

describe('rule 1: hardware levels per node', () => {
  it('drops every hardware level when a rank spans several units (bound to a socket)', () => {
    const placements: RankPlacement[] = [
      { rank: 0, node: 'a', locality: 'SK0:L30:L20-1:L10-1:CR0-1:HT0-1:NM0' },
      { rank: 1, node: 'a', locality: 'SK0:L30:L20-1:L10-1:CR0-1:HT0-1:NM0' },
      { rank: 2, node: 'a', locality: 'SK1:L31:L22-3:L12-3:CR2-3:HT2-3:NM1' },
      { rank: 3, node: 'a', locality: 'SK1:L31:L22-3:L12-3:CR2-3:HT2-3:NM1' },
    ];
    const plan = planGroups(placements);
    expect(plan.levels).toEqual(['socket', 'node']);
    expect(plan.chain(0).map((g) => g.members)).toEqual([
      [0, 1],
      [0, 2],
    ]);
    const core = plan.dropped.find((d) => d.level === 'core')!;
    expect(core.reason).toBe('rank 0 spans 2 core units (0,1)');
  });

  it('treats an unknown locality (unbound) as placed only at the node', () => {
    const plan = planGroups([
      { rank: 0, node: 'a', locality: '' },
      { rank: 1, node: 'a', locality: coreLocality(1, 2) },
    ]);
    expect(plan.levels).toEqual(['node']);
    expect(plan.dropped.find((d) => d.level === 'numa')!.reason).toMatch(/rank 0 has no NM entry/);
  });

  it('keeps core groups when two ranks share a core, and l2 when cores share an L2', () => {
    // 4 cores, L2 shared by core pairs, 2 hardware threads per core; 8 ranks, one per PU.
    const loc = (pu: number) => {
      const core = Math.floor(pu / 2);
      return `SK0:L30:L2${Math.floor(core / 2)}:L1${core}:CR${core}:HT${pu}:NM0`;
    };
    const plan = planGroups(range(0, 7).map((r) => ({ rank: r, node: 'a', locality: loc(r) })));
    // core and l1 have the same partition: the upper name (l1) survives.
    expect(plan.levels).toEqual(['l1', 'l2', 'node']);
    expect(plan.chain(0).map((g) => g.members)).toEqual([
      [0, 1],
      [0, 2],
      [0, 4],
    ]);
    expect(plan.chain(6).map((g) => g.members)).toEqual([
      [6, 7],
      [4, 6],
    ]);
    expect(plan.dropped.find((d) => d.level === 'core')!.reason).toBe('same groups as l1');
    expect(plan.dropped.find((d) => d.level === 'l3')!.reason).toBe('same groups as node');
  });

  it('orders levels by inclusion: NUMA below L3 when several NUMA nodes share an L3', () => {
    // 8 cores; NUMA per 2 cores, L3 per 4 cores, one socket.
    const loc = (c: number) => `SK0:L3${Math.floor(c / 4)}:L2${c}:L1${c}:CR${c}:HT${c}:NM${Math.floor(c / 2)}`;
    const plan = planGroups(range(0, 7).map((r) => ({ rank: r, node: 'a', locality: loc(r) })));
    expect(plan.levels).toEqual(['numa', 'l3', 'node']);
    expect(plan.chain(0).map((g) => [g.level, g.members])).toEqual([
      ['numa', [0, 1]],
      ['l3', [0, 2]],
      ['node', [0, 4]],
    ]);
  });

  it('drops a level that does not nest with the others, with a warning', () => {
    // NUMA {0,1},{2,3}; socket {0,1},{2,3}; a bogus L3 {0},{1,2},{3} crosses both.
    const loc = (c: number) => `SK${c >> 1}:L3${[0, 1, 1, 2][c]}:L2${c}:L1${c}:CR${c}:HT${c}:NM${c >> 1}`;
    const plan = planGroups(range(0, 3).map((r) => ({ rank: r, node: 'a', locality: loc(r) })));
    const l3 = plan.dropped.find((d) => d.level === 'l3')!;
    expect(l3.warning).toBe(true);
    expect(l3.reason).toMatch(/do not nest with those of (numa|socket)/);
    expect(plan.levels).toEqual(['socket', 'node']);
  });

  it('chooses levels per node: each node uses its own placement', () => {
    const placements: RankPlacement[] = [
      // node a: 4 ranks, two per socket → socket groups
      ...range(0, 3).map((r) => ({ rank: r, node: 'a', locality: coreLocality(r, 2) })),
      // node b: 2 ranks, one per socket → socket dropped on b
      { rank: 4, node: 'b', locality: coreLocality(0, 2) },
      { rank: 5, node: 'b', locality: coreLocality(2, 2) },
    ];
    const plan = planGroups(placements);
    expect(plan.levels).toEqual(['socket', 'node', 'world']);
    expect(plan.chain(0).map((g) => g.members)).toEqual([
      [0, 1],
      [0, 2],
      [0, 4],
    ]);
    expect(plan.chain(4).map((g) => g.members)).toEqual([
      [4, 5],
      [0, 4],
    ]);
    expect(plan.dropped.filter((d) => d.node === 'b' && d.level === 'socket').map((d) => d.reason)).toEqual(['every socket unit holds one rank']);
  });
});

describe('rule 2: nodes without a switch at a level', () => {
  it('use their unit of the nearest level below', () => {
    const network = parseSimpleNetworkFile(['n1 leafA spine', 'n2 leafA spine', 'n3 leafB spine', 'n4 leafC'].join('\n'), 'net');
    const placements = ['n1', 'n2', 'n3', 'n4'].map((node, rank) => ({ rank, node, locality: '' }));
    const plan = planGroups(placements, { network });
    expect(plan.levels).toEqual(['node', 'switch1', 'switch2', 'world']);
    expect(plan.chain(0).map((g) => [g.level, g.members])).toEqual([
      ['switch1', [0, 1]],
      ['switch2', [0, 2]],
      ['world', [0, 3]],
    ]);
    expect(plan.chain(3)).toEqual([expect.objectContaining({ level: 'world', members: [0, 3] })]);
  });
});

describe('rule 3: groups, leaders, members', () => {
  it('sorts members and leads by the lowest rank when ranks are interleaved across nodes', () => {
    // Round-robin over 3 nodes, 2 ranks each: node n(r mod 3).
    const placements = range(0, 5).map((r) => ({ rank: r, node: `n${r % 3}`, locality: coreLocality(Math.floor(r / 3), 1) }));
    const plan = planGroups(placements);
    expect(plan.groups.get('node')!.map((g) => g.members)).toEqual([
      [0, 3],
      [1, 4],
      [2, 5],
    ]);
    expect(plan.chain(0).map((g) => g.members)).toEqual([
      [0, 3],
      [0, 1, 2],
    ]);
    expect(plan.chain(4).map((g) => g.members)).toEqual([[1, 4]]);
  });

  it('omits one-member groups and adds world only when more than one unit is left', () => {
    const single = planGroups([{ rank: 0, node: 'a', locality: coreLocality(0, 2) }]);
    expect(single.levels).toEqual(['node']);
    expect(single.chain(0)).toEqual([]);
    const oneRankPerNode = planGroups([0, 1, 2].map((rank) => ({ rank, node: `n${rank}`, locality: '' })));
    expect(oneRankPerNode.levels).toEqual(['node', 'world']);
    expect(oneRankPerNode.groups.get('node')).toBeUndefined();
    expect(oneRankPerNode.chain(1).map((g) => g.members)).toEqual([[0, 1, 2]]);
  });
});

describe('rule 4: disabled levels', () => {
  const placements = byCore(['a', 'b'], 4, 2);
  it('removes a disabled level before building', () => {
    const plan = planGroups(placements, { disabled: ['node'] });
    expect(plan.levels).toEqual(['socket', 'world']);
    expect(plan.chain(0).map((g) => g.members)).toEqual([
      [0, 1],
      [0, 2, 4, 6],
    ]);
    expect(plan.dropped.filter((d) => d.node === 'a' && d.reason === 'disabled by configuration')).toEqual([]);
    const noSocket = planGroups(placements, { disabled: ['socket'] });
    expect(noSocket.dropped.find((d) => d.node === 'a' && d.level === 'socket')!.reason).toBe('disabled by configuration');
  });
  it('refuses to disable world or an unknown level', () => {
    expectError(() => planGroups(placements, { disabled: ['world'] }), 'EINVAL', /world cannot be disabled/);
    expectError(() => planGroups(placements, { disabled: ['sockets'] }), 'EINVAL', /unknown level "sockets"/);
    expectError(() => planGroups(placements, { disabled: ['switch1'] }), 'EINVAL', /no switch levels/);
  });
});

describe('input checks', () => {
  it('rejects duplicate, missing and out-of-range ranks', () => {
    expectError(
      () =>
        planGroups([
          { rank: 0, node: 'a' },
          { rank: 0, node: 'a' },
        ]),
      'EINVAL',
      /rank 0 is placed twice/,
    );
    expectError(
      () =>
        planGroups([
          { rank: 0, node: 'a' },
          { rank: 2, node: 'a' },
        ]),
      'EINVAL',
      /rank 2 is outside 0…1/,
    );
  });
  it('rejects a node missing from the network', () => {
    const network = parseSimpleNetworkFile('n1 sw1\n', 'net.txt');
    expectError(
      () =>
        planGroups(
          [
            { rank: 0, node: 'n1' },
            { rank: 1, node: 'n2' },
          ],
          { network },
        ),
      'ETOPOLOGY',
      /n2/,
    );
  });
  it('rejects a malformed locality string naming the rank', () => {
    expectError(() => planGroups([{ rank: 0, node: 'a', locality: 'XX0' }]), 'ETOPOLOGY', /rank 0/);
  });
});

describe('JSON form', () => {
  it('has exactly the documented shape and key order', () => {
    const plan = planGroups(byCore(['n1'], 4, 2));
    const json = planToJson(plan);
    expect(Object.keys(json)).toEqual(['levels', 'ranks', 'dropped']);
    expect(JSON.stringify(json.ranks[0])).toBe(
      JSON.stringify({
        rank: 0,
        node: 'n1',
        locality: coreLocality(0, 2),
        groups: [
          { level: 'socket', members: [0, 1], leader: 0 },
          { level: 'node', members: [0, 2], leader: 0 },
        ],
      }),
    );
    expect(Object.keys(json.dropped[0]!)).toEqual(['node', 'level', 'reason']);
  });
});
