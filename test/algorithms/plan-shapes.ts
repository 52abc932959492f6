import { planGroups, type Group, type GroupPlan } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { parseSimpleNetworkFile } from '../../src/topology/network/simple-file.js';
import { byCore, coreLocality, pad, range } from '../helpers/placements.js';
import { prng } from '../helpers/prng.js';

/** Plan shapes for whole-plan simulations (those of hierarchical-allgather.test.ts). */

const unbound = (ranks: number[], nodeOf: (r: number) => string): RankPlacement[] => ranks.map((rank) => ({ rank, node: nodeOf(rank), locality: '' }));

/** Six shapes: world only, one node, nodes of 3 and of 5, uneven sockets/nodes, ranks interleaved over two nodes. */
export const SHAPES: { name: string; plan: (p: number) => GroupPlan }[] = [
  { name: 'world only', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${r}`)) },
  { name: 'one node', plan: (p) => planGroups(unbound(range(0, p - 1), () => 'a')) },
  { name: 'nodes of 3', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${Math.floor(r / 3)}`)) },
  { name: 'nodes of 5', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${Math.floor(r / 5)}`)) },
  {
    name: 'uneven sockets/nodes',
    plan: (p) => {
      const sizes = [4, 1, 3, 2];
      const placements: RankPlacement[] = [];
      for (let k = 0; placements.length < p; k++) {
        for (let j = 0; j < sizes[k % 4]! && placements.length < p; j++)
          placements.push({ rank: placements.length, node: `n${k}`, locality: coreLocality(j, 2) });
      }
      return planGroups(placements);
    },
  },
  // ranks round-robin over two nodes: the ranks of a node are not consecutive
  {
    name: 'interleaved',
    plan: (p) => planGroups(range(0, p - 1).map((rank) => ({ rank, node: `n${rank % 2}`, locality: coreLocality(Math.floor(rank / 2), 2) }))),
  },
];

/** Every shape for p = 1 … 20. */
export const PLANS = SHAPES.flatMap((shape) => range(1, 20).map((p) => ({ name: `${shape.name}, p ${p}`, plan: shape.plan(p) })));

/** Shuffled ranks over unequal nodes with random cores and switches, as in hierarchical.test.ts. */
export function randomPlans(count: number, seed: number): GroupPlan[] {
  const random = prng(seed);
  const pick = (n: number) => Math.floor(random() * n);
  const plans: GroupPlan[] = [];
  for (let trial = 0; trial < count; trial++) {
    const nodes = range(0, pick(6)).map((k) => `h${k}`);
    const perNode = nodes.map(() => 1 + pick(6));
    const size = perNode.reduce((a, b) => a + b, 0);
    const ranks = range(0, size - 1);
    for (let i = ranks.length - 1; i > 0; i--) {
      const j = pick(i + 1);
      [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
    }
    const placements: RankPlacement[] = [];
    let next = 0;
    nodes.forEach((node, k) => {
      const cores = range(0, 7)
        .sort(() => random() - 0.5)
        .slice(0, perNode[k]);
      for (const c of cores) placements.push({ rank: ranks[next++]!, node, locality: random() < 0.9 ? coreLocality(c, 4) : '' });
    });
    const spineOfLeaf = ['spine0', 'spine0', 'spine1', undefined];
    const lines = nodes.map((n) => {
      const leaf = pick(4);
      return [n, `leaf${leaf}`, spineOfLeaf[leaf]].filter((x) => x !== undefined).join(' ');
    });
    const network = random() < 0.7 ? parseSimpleNetworkFile(lines.join('\n'), 'net') : undefined;
    plans.push(planGroups(placements, { network, disabled: random() < 0.3 ? ['socket'] : [] }));
  }
  return plans;
}

/** S3's example shape: `nodes` nodes of `ppn` ranks mapped by core, `perSocket` per socket, `perLeaf` nodes per leaf switch under one spine. */
export function s3Plan(nodes: number, ppn: number, perSocket: number, perLeaf: number): GroupPlan {
  const names = range(1, nodes).map((i) => `node${pad(i)}`);
  const network = parseSimpleNetworkFile(names.map((n, i) => `${n} sw1${Math.floor(i / perLeaf) + 1} sw21`).join('\n'), 'net.txt');
  return planGroups(byCore(names, ppn, perSocket), { network });
}

/** An algorithm per level: the lowest level gets `low`, the top one `top`, the others `middle`. */
export function byLevel<A>(plan: GroupPlan, low: A, middle: A, top: A): (g: Group) => A {
  const last = plan.levels.length - 1;
  return (g) => {
    const i = plan.levels.indexOf(g.level);
    return i === last ? top : i === 0 ? low : middle;
  };
}
