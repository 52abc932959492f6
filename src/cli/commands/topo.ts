import { resolve } from 'node:path';
import { resolveConfig } from '../../config/load.js';
import { describeDrop, selectNodeLevels } from '../../groups/node-levels.js';
import { readProcessAffinity } from '../../topology/affinity.js';
import { discoverMachine } from '../../topology/discover.js';
import { formatIndexList } from '../../topology/index-list.js';
import { formatLocality, parseLocality } from '../../topology/locality-string.js';
import { placeRanks } from '../../topology/rank-mapping.js';
import { computeLocality } from '../../topology/process-locality.js';
import { HARDWARE_LEVELS, type HardwareLevel } from '../../topology/types.js';
import { pageNodes } from '../../native.js';
import { describeResidency, numaNodeOf, summarizeResidency, type PlacementReport } from '../../runtime/numa-residency.js';
import { shmLayout } from '../../runtime/shm-budget.js';
import { parseCommandArgs } from '../args.js';
import type { CliIo } from '../io.js';

export const topoHelp = `topocoll topo — what this machine looks like to topocoll

Usage: topocoll topo [--hwloc-xml FILE] [--config FILE] [--json]

  --hwloc-xml FILE   describe this hwloc XML instead of discovering the machine
  --config FILE      topocoll YAML (topology source, disabled levels)
  --json             machine-readable output

Shows the hardware levels with their unit counts, which would carry groups for one rank bound
to each core (as "topocoll run" places ranks) and why the others are dropped, this process's
PMIx locality string, whether it is bound, and the topology source used.
`;

export interface TopoReport {
  source: string;
  pus: number;
  levels: { level: HardwareLevel; units: number; active: boolean; reason?: string }[];
  process: { cpus: string; locality: string; localitySource: 'computed' | 'override'; bound: boolean };
  /** move_pages on a buffer this process first-touched: is first touch placing pages locally? */
  placement: PlacementReport;
  /** The node's shared segment for one rank per core (what `topocoll run -n <cores>` maps). */
  sharedMemory: {
    localRanks: number;
    channelBytes: number;
    channelMinBytes: number;
    channelPoolBytes: number;
    segmentBytes: number;
    budgetBytes: number;
    bcastQueueBytes: number;
    bcastTree: string;
  };
}

export function topoCommand(argv: string[], io: CliIo): number {
  const { values } = parseCommandArgs('topo', argv, {
    'hwloc-xml': { type: 'string' },
    config: { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean' },
  });
  if (values.help) {
    io.stdout(topoHelp);
    return 0;
  }
  const report = topoReport(
    values['hwloc-xml'] === undefined ? undefined : resolve(io.cwd, values['hwloc-xml']),
    values.config === undefined ? undefined : resolve(io.cwd, values.config),
    io.env,
  );
  io.stdout(values.json ? JSON.stringify(report, null, 2) + '\n' : formatTopo(report));
  return 0;
}

export function topoReport(hwlocXml: string | undefined, configPath: string | undefined, env: NodeJS.ProcessEnv): TopoReport {
  const config = resolveConfig(configPath, env);
  const machine = discoverMachine({
    hwlocXml: hwlocXml ?? config.topology.hwlocXml ?? undefined,
    env,
    source: hwlocXml === undefined ? config.topology.source : 'hwloc-xml',
  });
  const disabled = new Set(
    Object.entries(config.levels)
      .filter(([, s]) => !s.enabled)
      .map(([n]) => n),
  );
  const cores = machine.objects.core ?? machine.objects.pu ?? [];
  // Judge the levels for the placement `topocoll run` uses: one rank bound to each core.
  const placements = placeRanks(machine, { nodes: ['this'], ranksPerNode: cores.length, mapBy: 'core', bindTo: 'core' });
  const selection = selectNodeLevels(
    placements.map((p) => parseLocality(p.locality!)),
    new Set(HARDWARE_LEVELS.filter((l) => !disabled.has(l))),
  );
  const ranks = placements.map((p) => p.rank);
  const levels = HARDWARE_LEVELS.filter((l) => machine.objects[l] !== undefined).map((level) => {
    const drop = selection.dropped.find((d) => d.level === level);
    return {
      level,
      units: machine.objects[level]!.length,
      active: drop === undefined,
      ...(drop === undefined ? {} : { reason: describeDrop(level, drop.reason, ranks) }),
    };
  });
  const cpus = readProcessAffinity();
  const localRanks = cores.length;
  const layout = shmLayout(config, localRanks, cores.length);
  const override = config.topology.locality ?? env.TOPOCOLL_LOCALITY;
  const computed = computeLocality(machine, cpus);
  return {
    source: machine.source,
    pus: machine.pus.length,
    levels,
    process: {
      cpus: formatIndexList(cpus),
      locality: override ?? formatLocality(computed.locality),
      localitySource: override === undefined ? 'computed' : 'override',
      bound: computed.bound,
    },
    placement: firstTouchCheck(numaNodeOf(machine.objects.numa, cpus)),
    sharedMemory: {
      localRanks,
      channelBytes: layout.channelBytes,
      channelMinBytes: layout.channelMinBytes,
      channelPoolBytes: layout.channelPoolBytes,
      segmentBytes: layout.segmentBytes,
      budgetBytes: layout.budgetBytes,
      bcastQueueBytes: layout.bcast.queueBytes,
      bcastTree: layout.tree,
    },
  };
}

/** First-touches a buffer and asks the kernel where its pages went. */
function firstTouchCheck(expectedNode: number | undefined): PlacementReport {
  const buffer = new Uint8Array(256 * 1024);
  for (let i = 0; i < buffer.length; i += 4096) buffer[i] = 1;
  return summarizeResidency(pageNodes(buffer), expectedNode);
}

function formatTopo(r: TopoReport): string {
  const lines = [`topology source: ${r.source}`, `PUs: ${r.pus}`, '', 'level   units  groups (one rank bound to each core)'];
  for (const l of r.levels) lines.push(`${l.level.padEnd(7)} ${String(l.units).padStart(5)}  ${l.active ? 'active' : `dropped: ${l.reason}`}`);
  if (r.levels.every((l) => !l.active)) lines.push('        (no level inside the node adds a group here: the node level is the lowest)');
  lines.push(
    '',
    `this process: cpus ${r.process.cpus}, ${r.process.bound ? 'bound' : 'not bound (may run on every PU of the node)'}`,
    `locality (${r.process.localitySource}): ${r.process.locality}`,
  );
  const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;
  const shm = r.sharedMemory;
  lines.push(
    `shared memory per node: ${mib(shm.segmentBytes)} for ${shm.localRanks} ranks, ${mib(shm.segmentBytes / Math.max(1, shm.localRanks))} per rank: a bcast queue of ${shm.bcastQueueBytes / 1024} KiB (${shm.bcastTree} tree) and an outbox of ${mib(shm.channelPoolBytes)} for channels of ${shm.channelMinBytes / 1024}–${shm.channelBytes / 1024} KiB, made only to the ranks it sends to; budget ${mib(shm.budgetBytes)}`,
  );
  lines.push(`NUMA placement of first-touched memory (move_pages): ${describeResidency(r.placement)}`);
  if (!r.process.bound)
    lines.push(
      'hint: unbound processes are grouped from the node level up; bind each process to a core (mpirun --bind-to core, srun --cpu-bind=cores, taskset -c N) to use the levels inside the node.',
    );
  return lines.join('\n') + '\n';
}
