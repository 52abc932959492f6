import { TopocollError } from '../errors.js';
import { parseLocality, localityIndices } from '../topology/locality-string.js';
import { pathForNode } from '../topology/network/network-file.js';
import type { NetworkTopology } from '../topology/network/types.js';
import { HARDWARE_LEVELS, LOCALITY_CODE, type HardwareLevel, type Locality, type RankPlacement } from '../topology/types.js';
import { switchLevelName, validateDisabledLevels, type LevelName } from './levels.js';
import { describeDrop, isWarningDrop, selectNodeLevels, type DropReason, type NodeLevelSelection } from './node-levels.js';

/**
 * The group planner: from where every rank runs (node + locality string) and where every node
 * sits in the network, the per-level groups and leaders of S3. Normative rules:
 * 1. hardware levels are chosen per node (`selectNodeLevels`);
 * 2. a node with no switch at level K uses its unit of the nearest level below;
 * 3. bottom-up, the participating ranks that share a unit form a group led by its lowest
 *    rank; only leaders go on; members ascending; one-member groups are omitted;
 * 4. disabled levels are removed before building; `world` cannot be disabled.
 * Every rank that builds a plan from the same inputs gets the same plan.
 */

export interface PlanOptions {
  /** Switch paths of the nodes; without it there are no switch levels. */
  network?: NetworkTopology;
  /** Level names to remove before building. */
  disabled?: readonly string[];
}

export interface Group {
  level: LevelName;
  /** The unit the members share: `n1/numa0`, `n1`, `sw11`, `world`. */
  unit: string;
  /** Ranks, ascending. */
  members: number[];
  /** The lowest member. */
  leader: number;
}

export interface DroppedLevel {
  node: string;
  level: HardwareLevel;
  reason: string;
  /** The kind of reason (`reason` is its text), and the rank it names, if any. */
  cause: DropReason['kind'];
  rank?: number;
  /** True for drops that point at an inconsistent topology (levels that do not nest). */
  warning: boolean;
}

export class GroupPlan {
  /** Level names bottom-up. Hardware levels are listed when kept on at least one node. */
  readonly levels: LevelName[];
  /** Groups of each level, in the order of `levels`, ordered by leader. */
  readonly groups: ReadonlyMap<LevelName, Group[]>;
  readonly dropped: DroppedLevel[];
  readonly placements: readonly RankPlacement[];

  /** For every rank, its groups bottom-up (its node's own hardware order, then above). */
  private readonly chains: Map<LevelName, Int32Array>;
  private readonly levelOrderOfNode: (node: string) => LevelName[];

  /** @internal built by `planGroups` */
  constructor(init: {
    levels: LevelName[];
    groups: Map<LevelName, Group[]>;
    groupIndex: Map<LevelName, Int32Array>;
    dropped: DroppedLevel[];
    placements: readonly RankPlacement[];
    levelOrderOfNode: (node: string) => LevelName[];
  }) {
    this.levels = init.levels;
    this.groups = init.groups;
    this.chains = init.groupIndex;
    this.dropped = init.dropped;
    this.placements = init.placements;
    this.levelOrderOfNode = init.levelOrderOfNode;
  }

  get size(): number {
    return this.placements.length;
  }

  /** The groups `rank` belongs to, bottom-up, in the order a collective visits them. */
  chain(rank: number): Group[] {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.size) {
      throw new TopocollError('EINVAL', `rank ${rank} is outside 0…${this.size - 1}`, { rank });
    }
    const out: Group[] = [];
    for (const level of this.levelOrderOfNode(this.placements[rank]!.node)) {
      const index = this.chains.get(level)?.[rank] ?? -1;
      if (index >= 0) out.push(this.groups.get(level)![index]!);
    }
    return out;
  }
}

export function planGroups(placements: readonly RankPlacement[], options: PlanOptions = {}): GroupPlan {
  const size = placements.length;
  const ordered = orderByRank(placements);
  const network = options.network;
  const switchLevels = network?.levels ?? 0;
  const disabled = validateDisabledLevels(options.disabled ?? [], switchLevels);
  const enabledHardware = new Set<string>(HARDWARE_LEVELS.filter((l) => !disabled.has(l)));

  // Ranks per node, ascending; nodes in order of their lowest rank.
  const nodeRanks = new Map<string, number[]>();
  for (const p of ordered) {
    let list = nodeRanks.get(p.node);
    if (list === undefined) nodeRanks.set(p.node, (list = []));
    list.push(p.rank);
  }

  const parseCache = new Map<string, Locality | undefined>();
  const localityOf = (rank: number): Locality | undefined => {
    const text = ordered[rank]!.locality ?? '';
    if (parseCache.has(text)) return parseCache.get(text);
    const parsed = text === '' || text === '-' ? undefined : parseLocality(text, { rank });
    parseCache.set(text, parsed);
    return parsed;
  };

  const groups = new Map<LevelName, Group[]>();
  const groupIndex = new Map<LevelName, Int32Array>();
  const participating = new Uint8Array(size).fill(1);
  const addGroup = (level: LevelName, unit: string, members: number[]): void => {
    if (members.length < 2) return;
    let list = groups.get(level);
    let index = groupIndex.get(level);
    if (list === undefined || index === undefined) {
      groups.set(level, (list = []));
      groupIndex.set(level, (index = new Int32Array(size).fill(-1)));
    }
    const group: Group = { level, unit, members, leader: members[0]! };
    for (const r of members) {
      index[r] = list.length;
      if (r !== group.leader) participating[r] = 0;
    }
    list.push(group);
  };

  // Rule 1 and the hardware part of rule 3, node by node (hardware groups never cross nodes).
  const selectionCache = new Map<string, NodeLevelSelection>();
  const hardwareOrderOfNode = new Map<string, HardwareLevel[]>();
  const dropped: DroppedLevel[] = [];
  for (const [node, ranks] of nodeRanks) {
    const signature = ranks.map((r) => ordered[r]!.locality ?? '').join('\n');
    let selection = selectionCache.get(signature);
    if (selection === undefined) {
      selection = selectNodeLevels(ranks.map(localityOf), enabledHardware);
      selectionCache.set(signature, selection);
    }
    hardwareOrderOfNode.set(
      node,
      selection.kept.map((k) => k.level),
    );
    for (const d of selection.dropped) {
      const named = 'local' in d.reason ? { rank: ranks[d.reason.local]! } : {};
      dropped.push({ node, level: d.level, reason: describeDrop(d.level, d.reason, ranks), cause: d.reason.kind, ...named, warning: isWarningDrop(d.reason) });
    }
    for (const { level, unitOf } of selection.kept) {
      const buckets = new Map<number, number[]>();
      for (let i = 0; i < ranks.length; i++) {
        const rank = ranks[i]!;
        if (participating[rank] === 0) continue;
        const label = unitOf[i]!;
        let bucket = buckets.get(label);
        if (bucket === undefined) buckets.set(label, (bucket = []));
        bucket.push(rank);
      }
      for (const members of buckets.values()) {
        const unitIndex = localityIndices(localityOf(members[0]!)!, LOCALITY_CODE[level])![0];
        addGroup(level, `${node}/${level}${unitIndex}`, members);
      }
    }
  }
  // Groups of one level were created node by node; order them by leader.
  for (const level of HARDWARE_LEVELS) sortGroupsByLeader(groups.get(level), groupIndex.get(level));

  // Levels above the node: every rank's unit is a function of its node.
  const nodeNames = [...nodeRanks.keys()];
  const nodeIndexOfRank = new Int32Array(size);
  nodeNames.forEach((node, n) => {
    for (const r of nodeRanks.get(node)!) nodeIndexOfRank[r] = n;
  });
  const upperLevels: { level: LevelName; unitOfNode: string[] }[] = [];
  if (!disabled.has('node')) upperLevels.push({ level: 'node', unitOfNode: nodeNames });
  if (network !== undefined) {
    const paths = nodeNames.map((node) => pathForNode(network, node));
    for (let k = 1; k <= switchLevels; k++) {
      const level = switchLevelName(k);
      if (disabled.has(level)) continue;
      upperLevels.push({ level, unitOfNode: paths.map((p) => unitAtSwitchLevel(p.node, p.switches, k)) });
    }
  }
  for (const { level, unitOfNode } of upperLevels) {
    const buckets = new Map<string, number[]>();
    for (let r = 0; r < size; r++) {
      if (participating[r] === 0) continue;
      const unit = unitOfNode[nodeIndexOfRank[r]!]!;
      let bucket = buckets.get(unit);
      if (bucket === undefined) buckets.set(unit, (bucket = []));
      bucket.push(r);
    }
    for (const [unit, members] of buckets) addGroup(level, unit, members);
  }

  // `world` joins whatever is left at the top when that is more than one unit.
  const top: number[] = [];
  for (let r = 0; r < size; r++) if (participating[r] === 1) top.push(r);
  const hasWorld = top.length > 1;
  if (hasWorld) addGroup('world', 'world', top);

  const hardwareLevels = mergeLevelOrders([...hardwareOrderOfNode.values()]);
  const above: LevelName[] = [...upperLevels.map((u) => u.level), ...(hasWorld ? (['world'] as const) : [])];
  const levels: LevelName[] = [...hardwareLevels, ...above];
  return new GroupPlan({
    levels,
    groups,
    groupIndex,
    dropped,
    placements: ordered,
    levelOrderOfNode: (node) => [...(hardwareOrderOfNode.get(node) ?? []), ...above],
  });
}

/** Rule 2: the switch at level k, else the nearest one below, else the node itself. */
function unitAtSwitchLevel(node: string, switches: readonly (string | undefined)[], k: number): string {
  for (let j = k; j >= 1; j--) {
    const name = switches[j - 1];
    // Qualify by the level the name came from so a node and a switch of one name stay apart.
    if (name !== undefined) return j === k ? name : `${name}@switch${j}`;
  }
  return `${node}@node`;
}

/** Placements indexed by rank; every rank 0 … p−1 exactly once. */
function orderByRank(placements: readonly RankPlacement[]): RankPlacement[] {
  const ordered = new Array<RankPlacement>(placements.length);
  for (const p of placements) {
    if (!Number.isInteger(p.rank) || p.rank < 0 || p.rank >= placements.length) {
      throw new TopocollError('EINVAL', `rank ${p.rank} is outside 0…${placements.length - 1}`, {
        rank: p.rank,
        hint: 'Ranks must be numbered 0 … size−1, each exactly once.',
      });
    }
    if (ordered[p.rank] !== undefined) {
      throw new TopocollError('EINVAL', `rank ${p.rank} is placed twice`, { rank: p.rank });
    }
    if (p.node === '') throw new TopocollError('EINVAL', 'a rank has an empty node name', { rank: p.rank });
    ordered[p.rank] = p;
  }
  return ordered;
}

function sortGroupsByLeader(list: Group[] | undefined, index: Int32Array | undefined): void {
  if (list === undefined || index === undefined) return;
  list.sort((a, b) => a.leader - b.leader);
  list.forEach((g, i) => {
    for (const r of g.members) index[r] = i;
  });
}

/**
 * One bottom-up list of the hardware levels kept anywhere. Nodes usually agree; where they
 * do not (a heterogeneous cluster), levels that no order constrains fall back to the fixed
 * order. Each rank's chain still follows its own node's order.
 */
function mergeLevelOrders(orders: readonly HardwareLevel[][]): HardwareLevel[] {
  const unique = new Map<string, HardwareLevel[]>();
  for (const o of orders) unique.set(o.join(','), o);
  const present = HARDWARE_LEVELS.filter((l) => [...unique.values()].some((o) => o.includes(l)));
  const before = new Map<HardwareLevel, Set<HardwareLevel>>(present.map((l) => [l, new Set()]));
  for (const o of unique.values()) for (let i = 1; i < o.length; i++) before.get(o[i]!)!.add(o[i - 1]!);
  const out: HardwareLevel[] = [];
  const remaining = new Set(present);
  while (remaining.size > 0) {
    const next = [...remaining].find((l) => [...before.get(l)!].every((b) => !remaining.has(b))) ?? [...remaining][0]!;
    out.push(next);
    remaining.delete(next);
  }
  return out;
}
