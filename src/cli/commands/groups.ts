import { resolve } from 'node:path';
import { formatAlgorithm, type BcastAlgorithm, type ReduceAlgorithm } from '../../algorithms/algorithm-choice.js';
import { allgatherAlcd } from '../../algorithms/group-allgather.js';
import { DEFAULT_CONFIG_PATH, loadConfigFile } from '../../config/load.js';
import type { TopocollConfig } from '../../config/schema.js';
import { chooseForClass, type ClassChoice } from '../../algorithms/selection.js';
import { TopocollError } from '../../errors.js';
import { planToJson } from '../../groups/plan-json.js';
import { planGroups, type DroppedLevel, type Group, type GroupPlan } from '../../groups/plan.js';
import { compressHostlist } from '../../topology/network/hostlist.js';
import { readNetworkFile } from '../../topology/network/network-file.js';
import { parseCommandArgs, parseNonNegativeInt } from '../args.js';
import type { CliIo } from '../io.js';
import { mappingOptions, placementsFrom, mappingUsage } from '../mapping-options.js';

export const groupsHelp = `topocoll groups — plan the per-level groups of a job, without running it

Usage: topocoll groups (--localities FILE | <placement options>) [--network FILE]
                       [--disable L1,L2] [--config FILE] [--rank R] [--json]

  --localities FILE  where every rank runs: "<rank> <node> <locality>" lines
                     (as printed by "topocoll localities")
${mappingUsage}
  --network FILE     node-to-switch file or Slurm topology.conf (format detected)
  --disable LEVELS   comma-separated levels to leave out (core, l1, l2, l3, numa, socket,
                     node, switch1…switchK; not world)
  --config FILE      take disabled levels and the network file from a topocoll YAML file
  --rank R           also print the chain of groups rank R goes through
  --json             print the plan as JSON (levels, every rank's groups, dropped levels)
`;

export function groupsCommand(argv: string[], io: CliIo): number {
  const { values } = parseCommandArgs('groups', argv, {
    ...mappingOptions,
    localities: { type: 'string' },
    network: { type: 'string' },
    disable: { type: 'string' },
    config: { type: 'string' },
    rank: { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean' },
  });
  if (values.help) {
    io.stdout(groupsHelp);
    return 0;
  }
  const config = values.config === undefined ? undefined : loadConfigFile(resolve(io.cwd, values.config));
  const placements = placementsFrom('groups', values, io);
  const networkFile = values.network !== undefined ? resolve(io.cwd, values.network) : (config?.network.file ?? undefined);
  const network = networkFile === undefined ? undefined : readNetworkFile(networkFile);
  const disabled = [
    ...Object.entries(config?.levels ?? {})
      .filter(([, s]) => !s.enabled)
      .map(([name]) => name),
    ...(values.disable
      ?.split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '') ?? []),
  ];
  const plan = planGroups(placements, { network, disabled });
  const rank = values.rank === undefined ? undefined : parseNonNegativeInt('groups', 'rank', values.rank);
  if (rank !== undefined && rank >= plan.size) {
    throw new TopocollError('EINVAL', `topocoll groups: --rank ${rank} is outside 0…${plan.size - 1}`);
  }
  for (const w of network?.warnings ?? []) io.stderr(`topocoll: warning: ${w}\n`);
  for (const [reason, nodes] of dropsByReason(plan.dropped.filter((d) => d.warning))) {
    io.stderr(`topocoll: warning: ${reason} — on ${compressHostlist(nodes)}\n`);
  }
  if (values.json) {
    io.stdout(JSON.stringify(planToJson(plan)) + '\n');
  } else {
    io.stdout(formatPlan(plan, network?.source, config ?? loadConfigFile(DEFAULT_CONFIG_PATH)));
    if (rank !== undefined) io.stdout(formatChain(plan, rank));
  }
  return 0;
}

function formatPlan(plan: GroupPlan, networkSource: string | undefined, config: TopocollConfig): string {
  const nodes = new Set(plan.placements.map((p) => p.node));
  const lines = [`${plan.size} ranks on ${nodes.size} node(s); network: ${networkSource ?? 'none'}`, ''];
  // The algorithms do not depend on the eager limit; any value will do to name them.
  const small = chooseForClass(config, plan, 'small', 65536);
  const large = chooseForClass(config, plan, 'large', 65536);
  const names = (groups: Group[], pick: (g: Group) => string) => [...new Set(groups.map(pick))].join('|');
  const bySize = (groups: Group[], of: (c: ClassChoice) => (g: Group) => BcastAlgorithm | ReduceAlgorithm) => {
    const s = names(groups, (g) => formatAlgorithm(of(small)(g)));
    const l = names(groups, (g) => formatAlgorithm(of(large)(g)));
    return s === l ? s : `${s} / ${l}`;
  };
  // Allgather: the algorithm and its ALCD (S2's average logical communication distance, from the
  // schedule of the level's largest group).
  const allgatherOf = (groups: Group[], c: ClassChoice): string => {
    const largest = groups.reduce<Group | undefined>((a, g) => (a === undefined || g.members.length > a.members.length ? g : a), undefined);
    if (largest === undefined) return '-';
    const algorithm = c.allgather(largest);
    return `${algorithm} ${allgatherAlcd(algorithm, largest.members.length).toFixed(2)}`;
  };
  const allgatherText = (groups: Group[]) => {
    const s = allgatherOf(groups, small);
    const l = allgatherOf(groups, large);
    return s === l ? s : `${s} / ${l}`;
  };
  const rows = [['level', 'groups', 'size', 'leaders', 'bcast (small / large)', 'reduce (small / large)', 'allgather, ALCD (small / large)']];
  for (const level of plan.levels) {
    const groups = plan.groups.get(level) ?? [];
    const sizes = groups.map((g) => g.members.length);
    const sizeText = sizes.length === 0 ? '-' : Math.min(...sizes) === Math.max(...sizes) ? String(sizes[0]) : `${Math.min(...sizes)}-${Math.max(...sizes)}`;
    const leaders = groups.map((g) => g.leader);
    rows.push([
      level,
      String(groups.length),
      sizeText,
      abbreviate(leaders),
      bySize(groups, (c) => c.bcast),
      bySize(groups, (c) => c.reduce),
      allgatherText(groups),
    ]);
  }
  lines.push(...table(rows));
  const top = (c: ClassChoice) => (c.allreduce.variant === 'reduce-bcast' ? 'reduce-bcast' : `reduce-allreduce-bcast, top group ${c.allreduce.top}`);
  lines.push('', `allreduce: ${top(small)} (small)${top(large) === top(small) ? '' : `; ${top(large)} (large)`}; large above 65536 bytes`);
  const byReason = dropsByReason(plan.dropped);
  if (byReason.size > 0) {
    lines.push('', 'dropped levels:');
    for (const [reason, dropNodes] of byReason) lines.push(`  ${reason} — on ${compressHostlist(dropNodes)}`);
  }
  return lines.join('\n') + '\n';
}

/** Drops are the same on most nodes: one entry per (level, reason) with its nodes. */
function dropsByReason(dropped: readonly DroppedLevel[]): Map<string, string[]> {
  const byReason = new Map<string, string[]>();
  for (const d of dropped) {
    const key = `${d.level}: ${d.reason}`;
    let list = byReason.get(key);
    if (list === undefined) byReason.set(key, (list = []));
    list.push(d.node);
  }
  return byReason;
}

function formatChain(plan: GroupPlan, rank: number): string {
  const p = plan.placements[rank]!;
  const lines = ['', `rank ${rank} on ${p.node} (${p.locality || 'locality unknown'}):`];
  const chain = plan.chain(rank);
  if (chain.length === 0) lines.push('  in no group (alone at every level)');
  for (const g of chain) {
    const role = g.leader === rank ? 'leader' : `leader ${g.leader}`;
    lines.push(`  ${g.level.padEnd(8)} ${g.unit}: ${g.members.length} members (${abbreviate(g.members)}), ${role}`);
  }
  return lines.join('\n') + '\n';
}

function abbreviate(values: readonly number[], max = 8): string {
  if (values.length <= max) return values.join(',');
  return `${values.slice(0, max - 2).join(',')},…,${values[values.length - 1]}`;
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) =>
    r
      .map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd(),
  );
}
