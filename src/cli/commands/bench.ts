import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { TopocollError } from '../../errors.js';
import { crossCoreLatencyNs } from '../../native.js';
import { readProcessAffinity } from '../../topology/affinity.js';
import type { BindPolicy } from '../launcher.js';
import { benchPt2pt } from '../bench-pt2pt.js';
import { parseCommandArgs, parseNonNegativeInt, requireOne, usageError } from '../args.js';
import { sizesOf, type BenchRow, type BenchSettings, type GroupSizesRecord } from '../bench-worker.js';
import { benchCharts, parseBenchJson, topocollCommit, writeReport, type ReportRow } from '../bench-report.js';
import { Progress } from '../progress.js';
import { formatBytes } from '../svg-chart.js';
import type { CliIo } from '../io.js';
import { ompiUnavailable, runOmpi } from '../ompi-baseline.js';
import { benchAcrossHosts, describeShape, formatHostsTables, parseHostsShape, type HostsRun, type HostsShape } from '../bench-hosts.js';
import { libraryOf, PEER_NAMES, parsePeers, peerLabel, peerUnavailable, runPeer, type PeerName } from '../mpi-peers.js';
import { formatAllgatherAlcd, formatStrategies, runStrategies, STRATEGIES, STRATEGY_COLLECTIVES, type StrategyCollective } from '../strategy-sweep.js';
import { runWorkerJob } from '../worker-job.js';
import { checkMpirunJob } from '../mpirun.js';
import type { TopocollConfig } from '../../config/schema.js';
import { startHogs } from '../hogs.js';
import { explainBarrier } from '../barrier-explain.js';
import { loadConfigFile, resolveConfig } from '../../config/load.js';
import { cellsOf, formatCells, runModelJob } from '../model-accuracy.js';
import type { ModelRow, ModelSettings } from '../model-worker.js';

export const benchHelp = `topocoll bench — OSU-style latency of topocoll's collectives, with Open MPI's beside them

Usage: topocoll bench [COLLECTIVE] [-n N] [--nodes K] [--transport tcp,mpi] [--bind core|numa|socket|none]
                      [--collectives barrier,bcast,reduce,allreduce,allgather,gather,scatter,reduce-scatter,alltoall,
                                     scan,exscan]
                      [--min BYTES] [--max BYTES]
                      [--modes sync,addon,async,window] [--iterations N] [--hogs N] [--config F]
                      [--peers ompi,ompi-han,mpich|all] [--no-mpi]
       topocoll bench [COLLECTIVE] --hosts LEAVES×HOSTS×RANKS [--collectives …] [--min B] [--max B]
                      [--iterations N] [--repeat R] [--config F] [--peers LIST] [--no-mpi] [--json]
                      [--json] [--report DIR]
       topocoll bench [COLLECTIVE] --from-json FILE --report DIR
       topocoll bench bcast --sweep [-n N]
       topocoll bench --pt2pt [--min BYTES] [--max BYTES] [--iterations N] [--no-mpi]
       topocoll bench bcast|reduce|allreduce|allgather|reduce-scatter|alltoall --strategies [-n N] [--nodes K]
                      [--off LEVEL,…]
       topocoll bench barrier --explain [-n N] [--nodes K] [--network F] [--config F]
       topocoll bench [COLLECTIVE] --model [-n N] [--nodes K] [--min BYTES] [--max BYTES]
                      [--step F] [--repeat R] [--config F] [--json]

  COLLECTIVE         one of barrier, bcast, reduce, allreduce, allgather (default: all five)
  --sweep            with bcast: the S0 engine for every notification tree, S ∈ {1, 4, 16, 64}
                     buffers of 8 KiB and q ∈ {1, 2} sets, each relative to S = 1 (up to 16 MiB)

  --explain          with barrier: the model's prediction (S4's formulas, as auto uses
                     them) beside the measured time for every combination of the levels'
                     barrier algorithms and auto, then the node-wide shared area and Open
                     MPI's MPI_Barrier (one node); --config F gives the parameters to predict
                     with (model.*; default: the defaults or TOPOCOLL_CONFIG)
  --strategies       the collective once per per-level algorithm (each at every level: flat,
                     binomial, knomial:4, scatter-allgather / rabenseifner, shm inside nodes,
                     the allreduce variants, auto), relative to flat, with Open MPI at the same -n;
                     allgather: ring, recursive-doubling, bruck, neighbor-exchange, auto relative
                     to ring, and each algorithm's ALCD for the job's group sizes; reduce-scatter:
                     the top group's ring, recursive-halving (reduceScatter.top) and auto relative
                     to ring; alltoall: pairwise, bruck (alltoall.algorithm: one node) and auto
                     relative to pairwise. scan and exscan have no choice to compare
  --off LEVELS       with --strategies: with these levels switched off (a comma list)
  --model            how good the cost model behind auto is: one job runs, for every
                     collective and size, every configuration auto chooses among (each
                     combination of the levels' candidate algorithms, auto's algorithms at every
                     candidate segment, allreduce's variants over paired lower-level
                     algorithms) and auto itself, in --repeat rounds (default 3) of rotated
                     order, each configuration's least round kept (timed as OSU does: a barrier
                     before each call, the slowest rank's mean time in the call; barriers
                     back to back); prints per size auto's and the
                     best configuration's prediction and time, and the share of sizes where
                     auto is within 10 % of the best, the worst auto/best, the summed loss and
                     the predictions' median error. The one-node shared-area calls and the
                     JavaScript fast path (outside the model) are off. --json: every
                     configuration's row. Sizes from --min to --max times --step (default 4)

  -n N               ranks (default 2)
  --nodes K          emulate K nodes (ranks in blocks; TCP or MPI between them, --transport)
  --transport L      what carries the messages between nodes: tcp (topocoll's launcher and
                     links), mpi (the ranks under Open MPI's mpirun, one app context per
                     emulated node, configuration transport: mpi; needs topocoll/mpi, npm run
                     build:mpi), or tcp,mpi: both, one job each, side by side in one table
                     (default: the configuration's transport, tcp unless it says otherwise)
  --network FILE     a node-to-switch file for them (node0…nodeK−1): switch levels too
  --collectives L    which collectives (default barrier, bcast, reduce, allreduce and allgather;
                     gather, scatter, reduce-scatter, alltoall, scan and exscan on request:
                     root 0, no window mode)
  --min, --max       message sizes, doubling (default 4 … 4194304 bytes)
  --modes L          sync (blocking), addon (blocking, with the JavaScript fast path off:
                     every call through the addon), async (Promise) calls and/or window
                     (blocking, buffers in shared windows: comm.allocShared) (default
                     sync,async)
  --iterations N     timed calls per size up to 8 KiB (default 1000; 100 above)
  --repeat R         time R loops per size and keep each rank's median (default 1; both
                     topocoll and Open MPI)
  --hogs N           N busy processes (unbound) run beside the ranks for the whole benchmark,
                     Open MPI's runs included: latency under CPU contention
  --config F         the ranks' configuration (default: TOPOCOLL_CONFIG, else the defaults);
                     with --transport, its transport is replaced by the one measured
  --peers LIST       the MPI libraries measured beside topocoll (default: ompi): ompi (Open MPI's
                     defaults: coll/tuned), ompi-han (Open MPI's hierarchical coll/han), mpich
                     (MPICH's defaults), or all; each library's own collectives, at the same -n
  --no-mpi           no MPI library beside topocoll
  --pt2pt            point-to-point messages instead of collectives: OSU's osu_latency (ping-pong)
                     and osu_bw (a window of 64 isends) between 2 ranks, sizes ×4 from --min (1)
                     to --max (4 MiB), on one node and on 2 emulated nodes, beside Open MPI's
                     (bench/ompi/pt2pt.c; shared memory, and btl self,tcp for the 2 nodes)
  --hosts L×H×R      across an emulated cluster (root; see "topocoll cluster"): L leaf switches
                     under a spine, H hosts on each, R ranks per host. topocoll with its levels
                     (auto) and with none above the node (flat), started the torchrun way, beside
                     the MPI libraries (default --peers all) started through the cluster's agent,
                     and the link's capacity between two leaves (iperf3). Blocking calls only.
                     --config F: both topocoll runs' configuration (its network is the cluster's;
                     flat turns the switch levels off on top of it)
  --json             one JSON object per row instead of tables (with the job: ranks, hogs,
                     nodes, transport, and the commit and day of the run)
  --report DIR       after the run, one SVG chart per collective into DIR (made if missing):
                     latency against size on log-log axes, topocoll sync and async (each
                     transport), Open MPI and the memcpy limit where the table has it; named
                     COLLECTIVE-pN.svg (-nodesK, -hogsH when given). barrier has one size and
                     no chart
  --from-json FILE   with --report: draw the charts from saved --json output instead of
                     measuring (COLLECTIVE or --collectives pick some); a point several runs
                     in FILE have is drawn at the fastest, as bench/min-of-runs.mjs merges

On a terminal, a line on stderr shows which case runs and how many are left.

Latency is the per-rank mean over back-to-back calls after a warm-up, averaged over ranks
(min and max across ranks in --json). bcast moves bytes; reduce/allreduce sum int32 elements;
allgather's size is the bytes each rank sends (every rank receives N × that), gather's and
scatter's the bytes of each rank's block (the root receives or sends N × that), reduce-scatter's
(reduceScatterBlock, int32 sum) the bytes of each rank's block of the result, alltoall's the
bytes of each block (every rank sends and receives N × that), scan's and exscan's (int32 sum)
the bytes of each rank's input. The memcpy columns are one copy of the message (bcast) or of
the whole vector (N × bytes).
The MPI libraries' figures come from bench/ompi/coll_latency.c (built with each library's
mpicc) under its launcher at the same -n, bound to cores, in the same run; with --nodes on one
node (they cannot emulate nodes). With more ranks than cores Open MPI runs with
mpi_yield_when_idle, as its documentation prescribes; MPICH has no such setting.
`;

const COLLECTIVES = ['barrier', 'bcast', 'reduce', 'allreduce', 'allgather', 'gather', 'scatter', 'reduce-scatter', 'alltoall', 'scan', 'exscan'] as const;
/** What a run without COLLECTIVE or --collectives measures (the tables of bench/RESULTS.md). */
const DEFAULT_COLLECTIVES = ['barrier', 'bcast', 'reduce', 'allreduce', 'allgather'] as const;

export async function benchCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    'bench',
    argv,
    {
      np: { type: 'string', short: 'n' },
      nodes: { type: 'string' },
      transport: { type: 'string' },
      network: { type: 'string' },
      bind: { type: 'string' },
      collectives: { type: 'string' },
      min: { type: 'string' },
      max: { type: 'string' },
      modes: { type: 'string' },
      iterations: { type: 'string' },
      repeat: { type: 'string' },
      hogs: { type: 'string' },
      sweep: { type: 'boolean' },
      strategies: { type: 'boolean' },
      explain: { type: 'boolean' },
      model: { type: 'boolean' },
      step: { type: 'string' },
      config: { type: 'string' },
      off: { type: 'string' },
      'no-mpi': { type: 'boolean' },
      pt2pt: { type: 'boolean' },
      peers: { type: 'string' },
      hosts: { type: 'string' },
      json: { type: 'boolean' },
      report: { type: 'string' },
      'from-json': { type: 'string' },
      help: { type: 'boolean' },
    },
    true,
  );
  if (values.help) {
    io.stdout(benchHelp);
    return 0;
  }
  const target = positionals[0];
  if (positionals.length > 1 || (target !== undefined && !(COLLECTIVES as readonly string[]).includes(target))) {
    throw usageError('bench', `unknown collective "${positionals.join(' ')}": use one of ${COLLECTIVES.join(', ')}, or none for all`);
  }
  if (values['from-json'] !== undefined) return chartsFromJson(values, target, io);
  if (values.pt2pt) {
    if (target !== undefined) throw usageError('bench', '--pt2pt measures messages, not a collective');
    const sizes: number[] = [];
    const min = parseNonNegativeInt('bench', 'min', values.min ?? '1');
    const max = parseNonNegativeInt('bench', 'max', values.max ?? String(4 << 20));
    for (let b = Math.max(1, min); b <= max; b *= 4) sizes.push(b);
    return benchPt2pt({
      bind: requireOne<BindPolicy>('bench', 'bind', values.bind ?? 'core', ['core', 'numa', 'socket', 'none']),
      settings: { sizes, iterations: parseNonNegativeInt('bench', 'iterations', values.iterations ?? '1000'), window: 64 },
      mpi: !values['no-mpi'],
      io,
    });
  }
  if (values.report !== undefined && (values.strategies || values.explain || values.model)) {
    throw usageError('bench', '--report draws the latency run, not --strategies, --explain or --model');
  }
  if (values.model && (values.strategies || values.explain || values.sweep)) {
    throw usageError('bench', '--model goes alone, not with --strategies, --explain or --sweep');
  }
  if (values.step !== undefined && !values.model) throw usageError('bench', '--step goes with --model');
  if (values.sweep && target !== 'bcast') throw usageError('bench', '--sweep goes with "bcast"');
  if (values.strategies && !(STRATEGY_COLLECTIVES as readonly (string | undefined)[]).includes(target)) {
    const none = target === 'scan' || target === 'exscan' ? `; ${target} runs one algorithm per level: there is nothing to compare` : '';
    throw usageError('bench', `--strategies goes with ${STRATEGY_COLLECTIVES.join(', ')}${none}`);
  }
  const ranks = parseNonNegativeInt('bench', 'np', values.np ?? '2');
  const list = <T extends string>(name: string, text: string | undefined, allowed: readonly T[]): T[] =>
    (text ?? allowed.join(',')).split(',').map((c) => requireOne<T>('bench', name, c.trim(), allowed));
  const iterations = parseNonNegativeInt('bench', 'iterations', values.iterations ?? (values.sweep ? '300' : '1000'));
  const settings: BenchSettings = {
    collectives:
      target !== undefined
        ? [target as (typeof COLLECTIVES)[number]]
        : values.collectives === undefined
          ? [...DEFAULT_COLLECTIVES]
          : list('collectives', values.collectives, COLLECTIVES),
    modes: values.sweep
      ? ['sync']
      : values.modes === undefined
        ? ['sync', 'async']
        : list('modes', values.modes, ['sync', 'addon', 'async', 'window'] as const),
    minBytes: parseNonNegativeInt('bench', 'min', values.min ?? '4'),
    maxBytes: parseNonNegativeInt('bench', 'max', values.max ?? String((values.sweep ? 16 : 4) << 20)),
    itersSmall: iterations,
    itersLarge: Math.max(10, Math.floor(iterations / 10)),
    largeBytes: 8192,
    repeats: parseNonNegativeInt('bench', 'repeat', values.repeat ?? '1'),
  };
  if (settings.repeats < 1 || settings.repeats > 64) throw usageError('bench', '--repeat must be 1…64');
  if (settings.minBytes < 1 || settings.maxBytes < settings.minBytes) {
    throw usageError('bench', 'need 1 ≤ --min ≤ --max');
  }
  const job: BenchJob = {
    ranks,
    bind: requireOne<BindPolicy>('bench', 'bind', values.bind ?? 'core', ['core', 'numa', 'socket', 'none']),
    nodes: values.nodes === undefined ? undefined : parseNonNegativeInt('bench', 'nodes', values.nodes),
    network: values.network === undefined ? undefined : resolve(io.cwd, values.network),
    config: values.config === undefined ? undefined : resolve(io.cwd, values.config),
    settings,
    io,
  };
  if (values.transport !== undefined && (values.sweep || values.strategies || values.explain || values.model)) {
    throw usageError('bench', '--transport goes with the latency run, not --sweep, --strategies, --explain or --model');
  }
  if (values.model) return await benchModel(job, values.step, values.repeat, values.json === true);
  if (values.hosts !== undefined) {
    const clash = (['nodes', 'transport', 'sweep', 'strategies', 'explain', 'hogs', 'network', 'np'] as const).filter((k) => values[k] !== undefined);
    if (clash.length > 0) throw usageError('bench', `--hosts sets the job itself; drop --${clash.join(', --')}`);
    return await benchHosts(parseHostsShape(values.hosts), { ...settings, modes: ['sync'] }, values, io);
  }
  const latency = !values.explain && !values.strategies;
  const transports = latency ? latencyTransports(values.transport, job) : [];
  // Before anything runs: a job under mpirun that cannot start would fail only after the others.
  if (transports.includes('mpi')) checkMpirunJob(io.env);

  const hogCount = parseNonNegativeInt('bench', 'hogs', values.hogs ?? '0');
  if (hogCount > 64) throw usageError('bench', '--hogs must be 0…64');
  const hogs = hogCount > 0 ? startHogs(hogCount) : undefined;
  try {
    if (values.explain) {
      if (target !== 'barrier') throw usageError('bench', '--explain goes with "barrier"');
      // A bad configuration fails here, before any job starts.
      resolveConfig(job.config, io.env);
      io.stdout(await explainBarrier({ ranks, bind: job.bind, nodes: job.nodes, network: job.network, config: job.config, iterations, io }));
      return 0;
    }
    if (values.strategies) return await benchStrategies(job, target as StrategyCollective, values.off, values['no-mpi'] === true);
    return await benchLatency(job, transports, values, hogCount);
  } finally {
    hogs?.stop();
  }
}

/**
 * The transports of the latency run, in the order given: `--transport` (a comma list), else the
 * one the ranks' configuration names (so a configuration of transport: mpi is measured under
 * mpirun, as it has to run).
 */
function latencyTransports(text: string | undefined, job: BenchJob): Transport[] {
  if (text === undefined) return [resolveConfig(job.config, job.io.env).transport];
  return [...new Set(text.split(',').map((t) => requireOne<Transport>('bench', 'transport', t.trim(), TRANSPORTS)))];
}

type Transport = TopocollConfig['transport'];
const TRANSPORTS: readonly Transport[] = ['tcp', 'mpi'];

async function benchLatency(
  job: BenchJob,
  transports: Transport[],
  values: { sweep?: boolean; json?: boolean; 'no-mpi'?: boolean; peers?: string; report?: string },
  hogCount: number,
): Promise<number> {
  const { ranks, settings, io } = job;
  // The commit and day go into every --json row and the charts' footers: rows merged from
  // several runs, or charts redrawn later, still say what measured them and when.
  const commit = topocollCommit();
  const date = new Date().toISOString().slice(0, 10);
  // With emulated nodes too: Open MPI's collectives on one node are the reference a job across
  // nodes is read against (it cannot emulate nodes); the note says so.
  const peers: PeerName[] = values['no-mpi'] ? [] : parsePeers(values.peers ?? 'ompi');
  const jobs = transports.length;
  const progress = new Progress('topocoll bench', jobs + peers.length * settings.collectives.length + (values.sweep ? SWEEP_CASES.length : 0));
  const jobIo = progress.around(io);
  const rows: BenchRow[] = [];
  let sweepRows: BenchRow[];
  let baselineNote = '';
  let oversubscribed = false;
  const probe = coreLatencyProbe();
  try {
    probe.take('before');
    const sizes =
      settings.minBytes === settings.maxBytes ? formatBytes(settings.minBytes) : `${formatBytes(settings.minBytes)}–${formatBytes(settings.maxBytes)}`;
    for (const transport of transports) {
      const over = transports.length > 1 || transport !== 'tcp' ? `, ${transport}` : '';
      progress.step(`topocoll ${settings.collectives.join(', ')} (${settings.modes.join(' and ')}, ${sizes}, ${ranks} ranks${over})`);
      const result = await runBenchJob({ ...job, io: jobIo }, job.config, transport);
      if (result.code !== 0) return result.code;
      rows.push(...result.rows.map((r) => ({ ...r, transport })));
      oversubscribed ||= result.oversubscribed;
      probe.take(transports.length > 1 ? `after topocoll ${transport}` : 'after topocoll');
    }

    const notes: string[] = [];
    let measured = 0;
    for (const peer of peers) {
      const why = peerUnavailable(peer);
      if (why !== undefined) {
        notes.push(`no ${peerLabel(peer)} baseline: ${why}`);
        continue;
      }
      let version = '';
      for (const collective of settings.collectives) {
        progress.step(`${peerLabel(peer)} ${collective} (${ranks} ranks)`);
        const run = await runPeer(peer, collective, ranks, settings, oversubscribed);
        rows.push(...run.rows);
        version = run.version;
      }
      measured++;
      notes.push(`${peerLabel(peer)}: ${libraryOf(version)}${job.nodes !== undefined ? ' (one node: it cannot emulate nodes)' : ''}`);
    }
    progress.setTotal(jobs + measured * settings.collectives.length + (values.sweep ? SWEEP_CASES.length : 0));
    baselineNote = notes.join('; ');
    if (measured > 0) probe.take(peers.length === 1 && peers[0] === 'ompi' ? 'after Open MPI' : 'after the MPI libraries');

    sweepRows = values.sweep ? await runSweep({ ...job, io: jobIo }, progress) : [];
  } finally {
    progress.finish();
  }
  const jobRows: ReportRow[] = [...rows, ...sweepRows].map((r) => ({
    ...r,
    ranks,
    hogs: hogCount,
    ...(job.nodes !== undefined ? { nodes: job.nodes } : {}),
    ...(commit !== undefined ? { commit } : {}),
    date,
  }));
  if (values.json) {
    for (const r of jobRows) io.stdout(JSON.stringify(r) + '\n');
    if (probe.cpus) io.stdout(JSON.stringify({ probe: 'core-to-core-ns', cpus: probe.cpus, ...probe.taken }) + '\n');
  } else {
    if (hogCount > 0) io.stdout(`# ${hogCount} busy process${hogCount > 1 ? 'es' : ''} ran beside every job (--hogs)\n`);
    io.stdout(formatTables(rows, job, transports, baselineNote, oversubscribed));
    if (probe.cpus) io.stdout(`# ${probe.describe()}\n`);
    if (values.sweep) io.stdout(formatSweep(sweepRows, ranks, settings));
  }
  // The charts come from the very rows --json prints, so --from-json redraws them byte for byte.
  if (values.report !== undefined) reportCharts(jobRows, resolve(io.cwd, values.report), io);
  return 0;
}

/** `--from-json FILE --report DIR`: charts from saved rows, nothing measured. */
function chartsFromJson(values: Record<string, string | boolean | undefined>, target: string | undefined, io: CliIo): number {
  const measuring = [
    'np',
    'nodes',
    'transport',
    'network',
    'bind',
    'min',
    'max',
    'modes',
    'iterations',
    'repeat',
    'hogs',
    'sweep',
    'strategies',
    'explain',
    'config',
    'off',
    'no-mpi',
    'peers',
    'hosts',
    'json',
    'model',
    'step',
  ];
  const given = measuring.filter((k) => values[k] !== undefined);
  if (given.length > 0) {
    throw usageError('bench', `--from-json draws saved rows; ${given.map((k) => (k === 'np' ? '-n' : `--${k}`)).join(', ')} would measure`);
  }
  if (typeof values.report !== 'string') throw usageError('bench', '--from-json goes with --report DIR');
  const file = resolve(io.cwd, values['from-json'] as string);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    throw new TopocollError('EINVAL', `topocoll bench: cannot read ${file}: ${(cause as Error).message}`, { cause });
  }
  let rows = parseBenchJson(text, file);
  const picked =
    target !== undefined
      ? [target]
      : typeof values.collectives === 'string'
        ? values.collectives.split(',').map((c) => requireOne('bench', 'collectives', c.trim(), COLLECTIVES))
        : undefined;
  if (picked !== undefined) rows = rows.filter((r) => r.collective === 'memcpy' || picked.includes(r.collective));
  reportCharts(rows, resolve(io.cwd, values.report), io);
  return 0;
}

function reportCharts(rows: readonly ReportRow[], dir: string, io: CliIo): void {
  const charts = benchCharts(rows);
  if (charts.length === 0) {
    io.stderr(`topocoll bench: no charts for ${dir}: no rows of bcast, reduce, allreduce or allgather (barrier has one size)\n`);
    return;
  }
  writeReport(dir, charts);
  io.stderr(`topocoll bench: ${charts.length} chart${charts.length === 1 ? '' : 's'} in ${dir}: ${charts.map((c) => c.file).join(', ')}\n`);
}

/** `--model`: the cost model's predictions and choices against measurement (model-accuracy.ts). */
async function benchModel(job: BenchJob, stepText: string | undefined, repeatText: string | undefined, json: boolean): Promise<number> {
  const step = parseNonNegativeInt('bench', 'step', stepText ?? '4');
  if (step < 2) throw usageError('bench', '--step must be 2 or more');
  const sizes: number[] = [];
  for (let b = job.settings.minBytes; b <= job.settings.maxBytes; b *= step) sizes.push(b);
  const collectives = job.settings.collectives.filter(
    (c): c is ModelSettings['collectives'][number] => c === 'barrier' || c === 'bcast' || c === 'reduce' || c === 'allreduce' || c === 'allgather',
  );
  if (collectives.length < job.settings.collectives.length) throw usageError('bench', '--model covers barrier, bcast, reduce, allreduce and allgather');
  const settings: ModelSettings = { collectives, sizes, rounds: repeatText === undefined ? 3 : job.settings.repeats, targetMs: 10 };
  const progress = new Progress('topocoll bench', 1);
  let result: { code: number; rows: ModelRow[] };
  // One-node figures change with where the host puts the virtual CPUs: the probe says which state the job saw.
  const probe = coreLatencyProbe();
  try {
    probe.take('before');
    progress.step(`the cost model's candidates, ${settings.collectives.join(', ')} (${job.ranks} ranks)`);
    result = await runModelJob({ ...job, settings, io: progress.around(job.io) });
    probe.take('after');
  } finally {
    progress.finish();
  }
  if (result.code !== 0) return result.code;
  const where = `${job.ranks} ranks${job.nodes !== undefined ? ` on ${job.nodes} emulated nodes` : ''}`;
  if (json) {
    const commit = topocollCommit();
    for (const r of result.rows)
      job.io.stdout(JSON.stringify({ ...r, ranks: job.ranks, nodes: job.nodes ?? 1, ...(commit !== undefined ? { commit } : {}) }) + '\n');
    if (probe.cpus)
      job.io.stdout(JSON.stringify({ probe: 'core-to-core-ns', ranks: job.ranks, nodes: job.nodes ?? 1, cpus: probe.cpus, ...probe.taken }) + '\n');
    return 0;
  }
  job.io.stdout(
    formatCells(
      cellsOf(result.rows),
      `the cost model, ${where} (µs per call, the slowest rank's, a barrier before each; allgather: bytes per rank; pred: predicted; best: the fastest configuration measured)`,
    ) + (probe.cpus ? `# ${probe.describe()}\n` : ''),
  );
  return 0;
}

async function benchStrategies(job: BenchJob, collective: StrategyCollective, off: string | undefined, noMpi: boolean): Promise<number> {
  // allgather: the jobs also report their group sizes, for the algorithms' ALCD.
  const settings: BenchSettings = { ...job.settings, collectives: [collective], modes: ['sync'], groupSizes: collective === 'allgather' };
  let groupSizes: GroupSizesRecord['groupSizes'] | undefined;
  const strategies = STRATEGIES[collective];
  const progress = new Progress('topocoll bench', strategies.length + (noMpi ? 0 : 1));
  const jobIo = progress.around(job.io);
  let rows: BenchRow[];
  let ompi: BenchRow[] = [];
  let note = '';
  try {
    let done = 0;
    rows = await runStrategies(collective, off, async (config) => {
      // runStrategies runs STRATEGIES[collective] in its order, one job each.
      progress.step(`${collective} with ${strategies[done++]?.name ?? 'a strategy'} (${job.ranks} ranks)`);
      const r = await runBenchJob({ ...job, settings, io: jobIo }, config);
      const record = (r.rows as unknown[]).find((x): x is GroupSizesRecord => typeof x === 'object' && x !== null && 'groupSizes' in x);
      groupSizes ??= record?.groupSizes;
      return r;
    });
    if (!noMpi) {
      const why = ompiUnavailable();
      if (why === undefined) {
        progress.step(`Open MPI ${collective} (${job.ranks} ranks)`);
        const run = await runOmpi(collective, job.ranks, settings);
        ompi = run.rows;
        note = `\n# Open MPI: ${run.version}${job.nodes !== undefined ? ' (one node: it cannot emulate nodes)' : ''}\n`;
      } else {
        note = `\n# no Open MPI baseline: ${why}\n`;
      }
    }
  } finally {
    progress.finish();
  }
  const where = `${job.ranks} ranks${job.nodes !== undefined ? ` on ${job.nodes} emulated nodes` : ''}${off ? `, ${off} off` : ''}`;
  // What a row's bytes are (bench-worker.ts): the bytes each rank sends, its block of the result, one block.
  const unit: Partial<Record<StrategyCollective, string>> = {
    allgather: ' (bytes per rank)',
    'reduce-scatter': " (bytes of each rank's block, int32 sum)",
    alltoall: ' (bytes per block)',
  };
  job.io.stdout(formatStrategies(collective, rows, ompi, `${collective}${unit[collective] ?? ''}, ${where}`, settings) + note);
  if (collective === 'allgather' && groupSizes !== undefined) job.io.stdout(formatAllgatherAlcd(groupSizes, job.ranks));
  return 0;
}

/**
 * The one-way time of a cache line between the first two CPUs this process may use, taken
 * around the runs. On a VM the host moves the virtual CPUs, so this can change sharply within
 * seconds (bench/RESULTS.md), and small-message times follow it, so rows measured under
 * different values do not compare.
 */
function coreLatencyProbe() {
  const allowed = readProcessAffinity();
  const cpus = allowed.length >= 2 ? ([allowed[0]!, allowed[1]!] as const) : undefined;
  const taken: Record<string, number> = {};
  return {
    cpus,
    taken,
    take(when: string): void {
      if (cpus) taken[when] = Math.round(crossCoreLatencyNs(cpus[0], cpus[1], 100_000));
    },
    describe(): string {
      const values = Object.entries(taken).map(([when, ns]) => `${ns} ns ${when}`);
      return `a cache line from CPU ${cpus![0]} to CPU ${cpus![1]}: ${values.join(', ')} (it moves when the host moves virtual CPUs; rows measured under different values do not compare)`;
    },
  };
}

interface BenchJob {
  ranks: number;
  bind: BindPolicy;
  nodes?: number;
  network?: string;
  /** --config: the configuration of the latency run's ranks. */
  config?: string;
  settings: BenchSettings;
  io: CliIo;
}

/**
 * One benchmark job through the launcher (or mpirun, transport mpi); rows come back as JSON
 * lines from rank 0. `config` is the ranks' whole configuration (the job's --config is not
 * added to it).
 */
async function runBenchJob(job: BenchJob, config?: string, transport?: Transport): Promise<{ code: number; rows: BenchRow[]; oversubscribed: boolean }> {
  const { code, records, oversubscribed } = await runWorkerJob({
    ...job,
    config,
    transport,
    worker: 'bench-worker.js',
    settingsVariable: 'TOPOCOLL_BENCH',
  });
  if (code !== 0) job.io.stderr(`topocoll bench: the benchmark job failed (exit ${code})\n`);
  return { code, rows: records as BenchRow[], oversubscribed };
}

/** The S0 parameter space of the paper: every tree, S ∈ {1, 4, 16, 64} buffers of 8 KiB, q ∈ {1, 2}. */
export const SWEEP_TREES = ['flat', 'chain', 'kary:2', 'knomial:2', 'knomial:4'] as const;
export const SWEEP_BUFFERS = [1, 4, 16, 64] as const;
const SWEEP_FRAGMENT = 8192;
/** Every (tree, S, q) of the sweep, q ≤ S, in the order it runs. */
const SWEEP_CASES = SWEEP_TREES.flatMap((tree) =>
  SWEEP_BUFFERS.flatMap((buffers) => [1, 2].filter((sets) => sets <= buffers).map((sets) => ({ tree, buffers, sets }))),
);

async function runSweep(job: BenchJob, progress: Progress): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-sweep-'));
  const rows: BenchRow[] = [];
  try {
    for (const { tree, buffers, sets } of SWEEP_CASES) {
      progress.step(`bcast sweep: ${tree} tree, S=${buffers} q=${sets}`);
      const file = join(dir, 'sweep.yaml');
      writeFileSync(
        file,
        `shm:\n  bcast:\n    tree: ${tree}\n    queueBytes: ${buffers * SWEEP_FRAGMENT}\n    fragmentBytes: ${SWEEP_FRAGMENT}\n    sets: ${sets}\n`,
      );
      const r = await runBenchJob({ ...job, settings: { ...job.settings, collectives: ['bcast'], modes: ['sync'] } }, file);
      if (r.code !== 0) throw new TopocollError('EINVAL', `topocoll bench: the sweep job ${tree} S=${buffers} q=${sets} failed`);
      for (const row of r.rows) if (row.collective === 'bcast') rows.push({ ...row, mode: `${tree} S=${buffers} q=${sets}` });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** Per tree: µs at S = 1, then every (S, q) as a fraction of it (the paper's normalisation). */
function formatSweep(rows: BenchRow[], ranks: number, settings: BenchSettings): string {
  const out: string[] = [];
  const sizes = sizesOf(settings);
  for (const tree of SWEEP_TREES) {
    const cell = (s: number, q: number, bytes: number) => rows.find((r) => r.mode === `${tree} S=${s} q=${q}` && r.bytes === bytes)?.avgUs;
    const variants = SWEEP_BUFFERS.flatMap((s) => [1, 2].filter((q) => q <= s).map((q) => [s, q] as const)).filter(([s]) => s > 1);
    out.push('', `# S0 bcast, ${ranks} ranks, ${tree} tree, fragments of ${SWEEP_FRAGMENT / 1024} KiB: time at S = 1 (µs), others relative to it`);
    const header = ['bytes', 'S=1 µs', ...variants.map(([s, q]) => `S=${s} q=${q}`)];
    const table = [header];
    for (const bytes of sizes) {
      const base = cell(1, 1, bytes);
      table.push([
        String(bytes),
        base === undefined ? '-' : base.toFixed(2),
        ...variants.map(([s, q]) => {
          const t = cell(s, q, bytes);
          return t === undefined || base === undefined ? '-' : (t / base).toFixed(2);
        }),
      ]);
    }
    const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table) out.push(r.map((v, c) => v.padStart(widths[c]!)).join('  '));
  }
  return out.join('\n') + '\n';
}

/** `--hosts`: topocoll (auto and flat) and the MPI libraries across an emulated cluster (bench-hosts.ts). */
async function benchHosts(
  shape: HostsShape,
  settings: BenchSettings,
  values: { 'no-mpi'?: boolean; peers?: string; json?: boolean; report?: string; config?: string },
  io: CliIo,
): Promise<number> {
  const peers: PeerName[] = values['no-mpi'] ? [] : parsePeers(values.peers ?? 'all');
  const configPath = values.config === undefined ? undefined : resolve(io.cwd, values.config);
  // Checked here, so a bad file is named (with its line) before the cluster is made.
  if (configPath !== undefined) loadConfigFile(configPath);
  const configText = configPath === undefined ? '' : readFileSync(configPath, 'utf8');
  const progress = new Progress('topocoll bench', 4 + peers.length * settings.collectives.length);
  let run: HostsRun;
  try {
    run = await benchAcrossHosts(shape, settings, peers, progress.around(io), (what) => progress.step(what), configText);
  } finally {
    progress.finish();
  }
  const commit = topocollCommit();
  const date = new Date().toISOString().slice(0, 10);
  const ranks = shape.leaves * shape.hostsPerLeaf * shape.ranksPerHost;
  const rows: ReportRow[] = run.rows.map((r) => ({ ...r, ranks, hosts: describeShape(shape), ...(commit !== undefined ? { commit } : {}), date }));
  if (values.json) {
    for (const r of rows) io.stdout(JSON.stringify(r) + '\n');
    if (run.linkBytesPerSecond !== undefined)
      io.stdout(JSON.stringify({ probe: 'link-bytes-per-second', hosts: describeShape(shape), value: run.linkBytesPerSecond }) + '\n');
  } else io.stdout(formatHostsTables(run, shape, settings, peers));
  if (values.report !== undefined) reportCharts(rows, resolve(io.cwd, values.report), io);
  return 0;
}

/** A peer's name in a ratio column's header. */
const PEER_SHORT: Record<PeerName, string> = { ompi: 'OMPI', 'ompi-han': 'han', mpich: 'MPICH' };

function formatTables(rows: BenchRow[], job: BenchJob, transports: readonly Transport[], note: string, oversubscribed: boolean): string {
  const { ranks, nodes, settings } = job;
  const out: string[] = [];
  const fmt = (v: number | undefined) => (v === undefined ? '-' : v < 10 ? v.toFixed(2) : v < 1000 ? v.toFixed(1) : v.toFixed(0));
  // One column per mode and transport, the transports of a mode side by side; a single
  // transport keeps the plain labels (and the title names it unless it is the default, tcp).
  const several = transports.length > 1;
  const prefix = (t: Transport) => (several ? `${t} ` : '');
  const columns = settings.modes.flatMap((mode) =>
    transports.map((transport) => ({ mode, transport, label: several ? `${transport} ${mode}` : `topocoll ${mode}` })),
  );
  const names = transports.map((t) => t.toUpperCase()).join(' and ');
  const where =
    nodes !== undefined
      ? ` on ${nodes} emulated nodes, ${names} between them`
      : transports.length === 1 && transports[0] === 'tcp'
        ? ''
        : `, transport ${transports.join(' and ')}`;
  const compare = transports.includes('tcp') && transports.includes('mpi');
  for (const collective of settings.collectives) {
    const mine = rows.filter((r) => r.collective === collective);
    const sizes = [...new Set(mine.map((r) => r.bytes))].sort((a, b) => a - b);
    const cell = (mode: string, bytes: number, transport?: Transport) =>
      mine.find((r) => r.mode === mode && r.bytes === bytes && (transport === undefined || r.transport === transport))?.avgUs;
    // The MPI libraries measured, in PEER_NAMES' order; with one, its column and `sync / OMPI`
    // (or its own short name), with several each one's column and topocoll against the best.
    const peers = PEER_NAMES.filter((p) => mine.some((r) => r.mode === p));
    const best = (bytes: number) => {
      const times = peers.map((p) => cell(p, bytes)).filter((t): t is number => t !== undefined);
      return times.length > 0 ? Math.min(...times) : undefined;
    };
    const against = peers.length === 1 ? PEER_SHORT[peers[0]!] : 'best MPI';
    // The copy each message needs at least: the message (bcast), the whole result (allgather).
    // Every job measures it; the fastest stands.
    const copied = (bytes: number) => (collective === 'allgather' ? bytes * ranks : bytes);
    const memcpy = (bytes: number) => {
      const copies = rows.filter((r) => r.collective === 'memcpy' && r.bytes === copied(bytes)).map((r) => r.avgUs);
      return copies.length > 0 ? Math.min(...copies) : undefined;
    };
    const hasMemcpy = (collective === 'bcast' || collective === 'allgather') && sizes.some((b) => memcpy(b) !== undefined);
    const gather = collective === 'allgather';
    out.push(
      '',
      `# ${collective}, ${ranks} ranks${where}${oversubscribed ? ' (more ranks than cores)' : ''}: latency in µs per call, average over ranks${gather ? `; bytes per rank, memcpy of the whole result (${ranks} × bytes)` : ''}`,
    );
    const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? (a / b).toFixed(2) : '-');
    const header = [
      gather ? 'bytes/rank' : 'bytes',
      ...columns.map((c) => c.label),
      ...(compare ? ['mpi / tcp'] : []),
      ...peers.map(peerLabel),
      ...(peers.length > 0 ? transports.map((t) => `${prefix(t)}sync / ${against}`) : []),
      ...(hasMemcpy ? [gather ? 'memcpy result' : 'memcpy', ...transports.map((t) => `${prefix(t)}sync / memcpy`)] : []),
    ];
    const table = [header];
    for (const bytes of sizes) {
      const baseline = best(bytes);
      const copy = memcpy(bytes);
      const sync = (t: Transport) => cell('sync', bytes, t);
      table.push([
        String(bytes),
        ...columns.map((c) => fmt(cell(c.mode, bytes, c.transport))),
        ...(compare ? [ratio(sync('mpi'), sync('tcp'))] : []),
        ...peers.map((p) => fmt(cell(p, bytes))),
        ...(peers.length > 0 ? transports.map((t) => ratio(sync(t), baseline)) : []),
        ...(hasMemcpy ? [fmt(copy), ...transports.map((t) => ratio(sync(t), copy))] : []),
      ]);
    }
    const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table) out.push(r.map((v, c) => v.padStart(widths[c]!)).join('  '));
  }
  if (note) out.push('', `# baseline: ${note}`);
  return out.join('\n') + '\n';
}
