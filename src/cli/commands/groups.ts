import { resolve } from 'node:path';
import { allgatherAlcd } from '../../algorithms/group-allgather.js';
import { DEFAULT_CONFIG_PATH, loadConfigFile } from '../../config/load.js';
import type { TopocollConfig } from '../../config/schema.js';
import { Selector, sizeRuns, type Choice, type Explanation } from '../../algorithms/selection.js';
import { formatAlgorithm } from '../../algorithms/algorithm-choice.js';
import { TopocollError } from '../../errors.js';
import { planToJson } from '../../groups/plan-json.js';
import { exchangeLimits } from '../../runtime/job-planner.js';
import { planGroups, type DroppedLevel, type Group, type GroupPlan } from '../../groups/plan.js';
import { compressHostlist } from '../../topology/network/hostlist.js';
import { readNetworkFile } from '../../topology/network/network-file.js';
import { formatBytes } from '../svg-chart.js';
import { parseByteSize, parseCommandArgs, parseNonNegativeInt, usageError } from '../args.js';
import type { CliIo } from '../io.js';
import { mappingOptions, placementsFrom, mappingUsage } from '../mapping-options.js';

export const groupsHelp = `topocoll groups — plan the per-level groups of a job, without running it

Usage: topocoll groups (--localities FILE | <placement options>) [--network FILE]
                       [--disable L1,L2] [--config FILE] [--rank R] [--json]
                       [--explain [--bytes N,…]]

  --localities FILE  where every rank runs: "<rank> <node> <locality>" lines
                     (as printed by "topocoll localities")
${mappingUsage}
  --network FILE     node-to-switch file or Slurm topology.conf (format detected)
  --disable LEVELS   comma-separated levels to leave out (core, l1, l2, l3, numa, socket,
                     node, switch1…switchK; not world)
  --config FILE      take disabled levels and the network file from a topocoll YAML file
  --rank R           also print the chain of groups rank R goes through
  --json             print the plan as JSON (levels, every rank's groups, dropped levels)
  --explain          for each collective (reduce-scatter and scan included), every level's
                     candidate algorithms with the cost model's predicted time (the
                     configuration's \`model\`), the choice, the segment and the whole call's
                     prediction
  --bytes N,…        message sizes to explain (allgather, reduce-scatter: the whole vector;
                     units as 64KiB; default 8,64KiB,4MiB)
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
    explain: { type: 'boolean' },
    bytes: { type: 'string' },
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
    throw usageError('groups', `--rank ${rank} is outside 0…${plan.size - 1}`);
  }
  for (const w of network?.warnings ?? []) io.stderr(`topocoll: warning: ${w}\n`);
  for (const [reason, nodes] of dropsByReason(plan.dropped.filter((d) => d.warning))) {
    io.stderr(`topocoll: warning: ${reason} — on ${compressHostlist(nodes)}\n`);
  }
  if (values.json) {
    io.stdout(JSON.stringify(planToJson(plan)) + '\n');
  } else {
    const effective = config ?? loadConfigFile(DEFAULT_CONFIG_PATH);
    const selector = offlineSelector(effective, plan);
    io.stdout(formatPlan(plan, network?.source, selector));
    if (rank !== undefined) io.stdout(formatChain(plan, rank));
    if (values.explain) {
      const sizes = (values.bytes ?? '8,64KiB,4MiB').split(',').map((t) => parseByteSize('groups', 'bytes', t.trim()));
      for (const bytes of sizes) io.stdout(formatExplanations(selector, bytes));
    }
  }
  return 0;
}

/**
 * The plan's choices without running it: every node is taken to have a core per rank (the most
 * ranks any node has), not oversubscribed. Segments between nodes are capped by the eager limit
 * a job would have (job-planner.ts's exchangeLimits); without the addon, which knows the TCP limit,
 * by FALLBACK_EAGER_BYTES — then a large message's choices between nodes may differ from a
 * running job's (comm.explain gives those).
 */
function offlineSelector(config: TopocollConfig, plan: GroupPlan): Selector {
  const perNode = new Map<string, number>();
  for (const p of plan.placements) perNode.set(p.node, (perNode.get(p.node) ?? 0) + 1);
  let limits = { apart: config.transport === 'tcp' ? Infinity : FALLBACK_EAGER_BYTES, mixed: FALLBACK_EAGER_BYTES };
  try {
    limits = exchangeLimits(config, plan, config.transport === 'tcp' ? 'tcp' : 'layer');
  } catch (e) {
    if (!(e instanceof TopocollError)) throw e;
  }
  return new Selector(config, plan, limits, { cores: Math.max(1, ...perNode.values()), oversubscribed: false, mpi: config.transport === 'mpi' });
}

/** The eager limit assumed without the addon. */
const FALLBACK_EAGER_BYTES = 65536;

/** "binomial ≤ 64 KiB, scatter-allgather" — the algorithm per run of message sizes. */
function runsText(selector: Selector, pick: (c: Choice) => string): string {
  return sizeRuns(selector, pick)
    .map((r) => (r.upToBytes === null ? r.algorithm : `${r.algorithm} ≤ ${formatBytes(r.upToBytes)}`))
    .join(', ');
}

function formatPlan(plan: GroupPlan, networkSource: string | undefined, selector: Selector): string {
  const nodes = new Set(plan.placements.map((p) => p.node));
  const lines = [`${plan.size} ranks on ${nodes.size} node(s); network: ${networkSource ?? 'none'}`, ''];
  const largestOf = (groups: Group[]): Group | undefined =>
    groups.reduce<Group | undefined>((a, g) => (a === undefined || g.members.length > a.members.length ? g : a), undefined);
  // Allgather: the algorithms and their ALCD (S2's average logical communication distance, from
  // the schedule of the level's largest group).
  const rows = [['level', 'groups', 'size', 'leaders', 'bcast', 'reduce', 'allgather (ALCD)', 'gather', 'scatter', 'barrier']];
  for (const level of plan.levels) {
    const groups = plan.groups.get(level) ?? [];
    const sizes = groups.map((g) => g.members.length);
    const sizeText = sizes.length === 0 ? '-' : Math.min(...sizes) === Math.max(...sizes) ? String(sizes[0]) : `${Math.min(...sizes)}-${Math.max(...sizes)}`;
    const leaders = groups.map((g) => g.leader);
    const g = largestOf(groups);
    const n = g?.members.length ?? 1;
    rows.push([
      level,
      String(groups.length),
      sizeText,
      abbreviate(leaders),
      g === undefined ? '-' : runsText(selector, (c) => formatAlgorithm(c.bcast(g))),
      g === undefined ? '-' : runsText(selector, (c) => formatAlgorithm(c.reduce(g))),
      g === undefined ? '-' : runsText(selector, (c) => `${c.allgather(g)} ${allgatherAlcd(c.allgather(g), n).toFixed(2)}`),
      g === undefined ? '-' : runsText(selector, (c) => c.gather(g)),
      g === undefined ? '-' : runsText(selector, (c) => c.scatter(g)),
      g === undefined ? '-' : formatAlgorithm(selector.chooseBucket(0).barrier(g)),
    ]);
  }
  lines.push(...table(rows));
  lines.push(
    '',
    `allreduce: ${runsText(selector, (c) => (c.allreduce.variant === 'reduce-bcast' ? 'reduce-bcast' : `reduce-allreduce-bcast (top ${c.allreduce.top})`))}`,
  );
  lines.push('(sizes: of the message; allgather, gather, scatter, alltoall: of the whole vector. --explain shows the predictions behind each choice)');
  const byReason = dropsByReason(plan.dropped);
  if (byReason.size > 0) {
    lines.push('', 'dropped levels:');
    for (const [reason, dropNodes] of byReason) lines.push(`  ${reason} — on ${compressHostlist(dropNodes)}`);
  }
  return lines.join('\n') + '\n';
}

/** Every collective's explanation at `bytes`: a table per collective. */
function formatExplanations(selector: Selector, bytes: number): string {
  const lines = ['', `# the cost model at ${formatBytes(bytes)} (µs predicted; * = chosen, = configured)`];
  for (const collective of ['bcast', 'reduce', 'allreduce', 'allgather', 'gather', 'scatter', 'reduce-scatter', 'scan', 'alltoall', 'barrier'] as const) {
    lines.push(...formatExplanation(selector.explain(collective, bytes)));
  }
  return lines.join('\n') + '\n';
}

export function formatExplanation(e: Explanation): string[] {
  const seg = e.segmentBytes === 0 || e.segmentBytes >= e.bytes ? 'no segments' : `segments of ${formatBytes(e.segmentBytes)}`;
  // Reduce-scatter: its phase of rank blocks' column segments too (of each rank's block).
  const block =
    e.blockSegmentBytes === undefined ? '' : e.blockSegmentBytes === 0 ? ', whole blocks' : `, block columns of ${formatBytes(e.blockSegmentBytes)}`;
  const lines = ['', `${e.collective}: predicted ${e.predictedUs.toFixed(2)} µs, ${seg}${block}`];
  for (const l of e.levels) {
    const cells = l.candidates.map((c) => `${c.algorithm === l.chosen ? (l.configured ? '=' : '*') : ' '}${c.algorithm} ${c.us.toFixed(2)}`);
    lines.push(`  ${l.level} (group of ${l.groupSize}, ${l.link}): ${cells.join('  ')}`);
  }
  if (e.allreduce !== undefined)
    lines.push(`  whole call: ${e.allreduce.map((c) => `${c.algorithm === e.allreduceShape ? '*' : ''}${c.algorithm} ${c.us.toFixed(2)}`).join('  ')}`);
  if (e.alltoall !== undefined)
    lines.push(
      `  whole call: ${e.alltoall.map((c) => `${e.levels.some((l) => l.chosen === c.algorithm) ? '*' : ''}${c.algorithm} ${c.us.toFixed(2)}`).join('  ')}`,
    );
  if (e.segments.length > 1)
    lines.push(`  segments: ${e.segments.map((s) => `${s.bytes === 0 ? 'none' : formatBytes(s.bytes)} ${s.us.toFixed(2)}`).join('  ')}`);
  return lines;
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
