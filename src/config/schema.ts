// A namespace import, so the bundle (scripts/bundle.mjs) keeps only the parts of zod in use.
import * as z from 'zod';
import { autoShmBudgetBytes } from '../topology/node-memory.js';
import { DEFAULT_MACHINE_PROFILE, loadMachineProfile } from './machine-profiles.js';
import { fastPathFields, linkModel, linkModelFields, scanRoutingFields, sharedAreaFields, shmModelFields, windowThresholdFields } from './model-schema.js';

/**
 * The configuration schema — the single source of truth for what a topocoll YAML file may
 * contain, its defaults and its types. Every section is strict: an unknown key is an error
 * (a typo must not silently fall back to a default).
 */

/** The machine whose measured cost-model parameters are the defaults (config/profiles/). */
const PROFILE = loadMachineProfile(DEFAULT_MACHINE_PROFILE);

/** `core l1 l2 l3 numa socket node world switch1 switch2 …` */
export const LEVEL_NAME_PATTERN = /^(core|l1|l2|l3|numa|socket|node|world|switch[1-9][0-9]*)$/;

const levelSettings = z
  .object({
    /** Build groups at this level. `world` cannot be disabled. */
    enabled: z.boolean().default(true),
  })
  .strict();

const levels = z
  .record(z.string().regex(LEVEL_NAME_PATTERN, 'not a level name (core, l1, l2, l3, numa, socket, node, switch1…switchK, world)'), levelSettings)
  .default({})
  .superRefine((value, ctx) => {
    if (value.world?.enabled === false) {
      ctx.addIssue({ code: 'custom', path: ['world', 'enabled'], message: 'the world level cannot be disabled' });
    }
  });

const network = z
  .object({
    /**
     * `auto`: `file` when one is set, else `SLURM_TOPOLOGY_ADDR` under Slurm, else none.
     * `file`: a node-to-switch file or Slurm topology.conf (format detected from content).
     * `slurm`: `SLURM_TOPOLOGY_ADDR` / `SLURM_TOPOLOGY_ADDR_PATTERN` of every rank.
     * `none`: no switch levels.
     */
    source: z.enum(['auto', 'file', 'slurm', 'none']).default('auto'),
    file: z.string().min(1).nullable().default(null),
  })
  .strict()
  .superRefine((value, ctx) => {
    if (value.source === 'file' && value.file === null) {
      ctx.addIssue({ code: 'custom', path: ['file'], message: 'network.source is "file" but network.file is not set' });
    }
  });

const node = z
  .object({
    /**
     * How a process names its compute node: `auto` (SLURMD_NODENAME under Slurm, else the
     * short host name), `short-hostname`, `hostname`, `slurm`, `env:VAR`, or `name:LITERAL`.
     */
    identity: z
      .string()
      .regex(
        /^(auto|short-hostname|hostname|slurm|env:[A-Za-z_][A-Za-z0-9_]*|name:\S+)$/,
        'expected auto, short-hostname, hostname, slurm, env:VAR or name:LITERAL',
      )
      .default('auto'),
  })
  .strict();

const topology = z
  .object({
    /** `auto`: hwlocXml / HWLOC_XMLFILE, else lstopo when installed, else sysfs. */
    source: z.enum(['auto', 'hwloc-xml', 'lstopo', 'sysfs']).default('auto'),
    hwlocXml: z.string().min(1).nullable().default(null),
    /** Overrides this process's computed PMIx locality string (also TOPOCOLL_LOCALITY). */
    locality: z.string().min(1).nullable().default(null),
  })
  .strict()
  .superRefine((value, ctx) => {
    if (value.source === 'hwloc-xml' && value.hwlocXml === null) {
      ctx.addIssue({ code: 'custom', path: ['hwlocXml'], message: 'topology.source is "hwloc-xml" but topology.hwlocXml is not set' });
    }
  });

const timeouts = z
  .object({
    /**
     * Longest wait while processes find each other and connect (init), in milliseconds. Dead
     * peers during collectives are detected as they die, not by this timeout.
     */
    initMs: z.number().int().min(100).default(30_000),
    /**
     * The watchdog: a collective that has waited on its peers this long (a peer alive but stuck,
     * stopped, or never calling) fails with ETIMEDOUT on every rank, naming the ranks it waited
     * on. 0 turns it off. Dead or departed peers do not need it: they are reported at once.
     */
    collectiveMs: z
      .number()
      .int()
      .min(0)
      .max(2 ** 31 - 1)
      .default(600_000),
  })
  .strict();

const scheduler = z
  .object({
    /**
     * The scheduler slice (µs) requested by the threads that run collectives: with a short
     * slice a woken rank preempts a CPU-bound process sharing its core (Linux ≥ 6.12 EEVDF
     * custom slices; the kernel clamps to 100…100000). 0: the kernel's default.
     */
    sliceUs: z.number().int().min(0).max(100_000).default(100),
  })
  .strict();

/** How a rank waits for its peers (native/src/base/wait.h; docs/architecture.md §6). */
const waits = z
  .object({
    /**
     * spin (default): always spin and yield first. auto: sleep at once for a while whenever a wait
     * was seen losing its core (a spin that lost it, a yield that gave it away for long), and a
     * spin on a TCP peer at most remoteSpinUs; it cannot yet tell others' work from the job's own
     * ranks and threads (bench/RESULTS.md). sleep: never spin or yield.
     */
    mode: z.enum(['auto', 'spin', 'sleep']).default('spin'),
    /** waits: auto: the longest non-blocking spin on a TCP peer before sleeping in poll(), µs. */
    remoteSpinUs: z.number().int().min(0).max(100_000).default(50),
  })
  .strict();

const auto = <T extends z.ZodTypeAny>(inner: T) => z.union([z.literal('auto'), inner]).default('auto');

const shmBcast = z
  .object({
    /** Broadcast inside node-local groups through the S0 engine (false: binomial trees over the channels). */
    enabled: z.boolean().default(true),
    /**
     * Bytes of each rank's S0 queue (S·f), a multiple of the 4 KiB smallest fragment and at
     * least one per set; the sets are equal whole numbers of 4 KiB and the last one also takes
     * the rest. `auto`: from the budget.
     */
    queueBytes: auto(
      z
        .number()
        .int()
        .min(4096)
        .max(1 << 30)
        .refine((v) => v % 4096 === 0, 'must be a multiple of 4096 (the smallest fragment)'),
    ),
    /** Fragment size; `auto`: chosen per message size by the cost model. */
    fragmentBytes: auto(
      z
        .number()
        .int()
        .min(4096)
        .refine((v) => (v & (v - 1)) === 0, 'must be a power of two'),
    ),
    /** Buffer sets q: the root refills one while readers drain another. */
    sets: z.number().int().min(1).max(4).default(2),
    /** Notification tree: flat, chain, binomial, kary:K, knomial:K; `auto`: the cost model's choice. */
    tree: z
      .string()
      .regex(/^(auto|flat|chain|binomial|(kary|knomial):([2-9]|[1-9][0-9]+))$/, 'expected auto, flat, chain, binomial, kary:K or knomial:K')
      .default('auto'),
  })
  .strict()
  .superRefine((value, ctx) => {
    if (value.queueBytes !== 'auto' && value.queueBytes < value.sets * 4096) {
      ctx.addIssue({
        code: 'custom',
        path: ['queueBytes'],
        message: `${value.queueBytes} bytes cannot hold ${value.sets} sets of at least one 4096-byte fragment each (raise queueBytes or lower shm.bcast.sets)`,
      });
    }
  });

/** The S0 engine's cost model; defaults from the default machine profile, measured by `topocoll tune shm`. */
const shmModel = withDefaults(shmModelFields, PROFILE.shmModel);

const shm = z
  .object({
    /**
     * Bytes of shared memory per node and communicator: its segment (the S0 bcast queues, the
     * ranks' outboxes for their channels, the shared area) and its windows together. `auto`: half
     * of the smaller of /dev/shm's size and the node's memory.
     */
    budgetBytes: auto(
      z
        .number()
        .int()
        .min(1 << 20),
    ).transform((v) => (v === 'auto' ? autoShmBudgetBytes() : v)),
    /**
     * Bytes of the largest one-way channel between two ranks of a node (a power of two, 16 KiB …
     * 64 MiB); `auto`: 1 MiB, halved until a ring per ordered pair of the node's ranks would fit
     * 48 MiB (512 KiB at 8 ranks, 64 KiB from 21). A rank's channels are made from its outbox
     * when it first needs them: an equal share of what is left there once the smallest channel
     * (64 KiB, or this if smaller) is kept for every other rank of the node.
     */
    channelBytes: auto(
      z
        .number()
        .int()
        .min(16 << 10)
        .max(64 << 20)
        .refine((v) => (v & (v - 1)) === 0, 'must be a power of two'),
    ),
    /**
     * Bytes of each rank's outbox, from which its channels to the ranks it sends to are made;
     * `auto`: 8 MiB and headers (127 channels of 64 KiB), less if the budget cannot hold that for
     * every local rank.
     */
    channelPoolBytes: auto(
      z
        .number()
        .int()
        .min(64 << 10),
    ),
    /**
     * A waiter about to sleep pays the store-load fence of the wake-up protocol with
     * membarrier(2), so the ranks that wake it (every send, every notification) need no fence.
     * Used only when the kernel offers it; false: both sides fence.
     */
    membarrier: z.boolean().default(true),
    bcast: shmBcast.default({ enabled: true, queueBytes: 'auto', fragmentBytes: 'auto', sets: 2, tree: 'auto' }),
    model: shmModel.prefault({}),
  })
  .strict();

/** Bytes: a number, or a string with a binary unit (`64KiB`, `1MiB`, `512`). */
const UNITS: Record<string, number> = { '': 1, B: 1, KiB: 1024, K: 1024, MiB: 1 << 20, M: 1 << 20, GiB: 1 << 30, G: 1 << 30 };
export const byteSize = z.union([
  z.number().int().nonnegative(),
  z
    .string()
    .regex(/^\s*\d+\s*(B|KiB|K|MiB|M|GiB|G)?\s*$/, 'expected a size in bytes such as 65536, 64KiB or 1MiB')
    .transform((text) => {
      const m = /^\s*(\d+)\s*([A-Za-z]*)\s*$/.exec(text)!;
      return Number(m[1]) * UNITS[m[2]!]!;
    }),
]);

const levelKey = z.string().regex(LEVEL_NAME_PATTERN, 'not a level name (core, l1, l2, l3, numa, socket, node, switch1…switchK, world)');
const KNOMIAL = 'knomial:([2-9]|[1-9][0-9]+)';

/**
 * Per collective: the algorithm of each level's groups (levels not named use `auto`, the
 * choice of the plan for the message size) and the pipelining segment (`auto`: none for small
 * messages, a size that keeps every level busy for large ones; 0: never segment).
 */
const bcastCollective = z
  .object({
    /**
     * `levels`: the levels' algorithms below. `one-sided`: S1's one-sided binomial bcast over all
     * ranks (src/algorithms/one-sided-bcast.ts) for bcasts whose buffer is a shared window
     * (allocShared; on every rank, at the same offset of its part) — the parent puts the data
     * into its children's windows and each rank's progress thread forwards it; between nodes the
     * puts travel as messages. Bcasts of ordinary buffers keep the levels.
     */
    algorithm: z.enum(['levels', 'one-sided']).default('levels'),
    /**
     * The one-sided bcast's waits for a put's arrival and the root's for the done counts, inside
     * a node: 0 sleeps on the engine's doorbell after a short spin; N > 0 polls every N
     * microseconds instead (S1's helper thread's "sleep a timeout between polls").
     */
    pollMicros: z.number().int().min(0).max(1_000_000).default(0),
    levels: z
      .record(
        levelKey,
        z
          .string()
          .regex(new RegExp(`^(auto|flat|binomial|${KNOMIAL}|scatter-allgather|shm)$`), 'expected auto, flat, binomial, knomial:K, scatter-allgather or shm'),
      )
      .default({}),
    segment: auto(byteSize),
    /**
     * In a job on one node without configured levels whose shared area (`allreduce.shm`) uses
     * the every-rank protocol, bcasts of at most 8 KiB go through that area one way
     * (native/src/shm/shm_allreduce.h): the root deposits its data, the others copy it out.
     * `false`: the algorithms of the levels.
     */
    shm: z.boolean().default(true),
  })
  .strict();

const reduceCollective = z
  .object({
    levels: z
      .record(
        levelKey,
        z.string().regex(new RegExp(`^(auto|flat|binomial|${KNOMIAL}|rabenseifner|shm)$`), 'expected auto, flat, binomial, knomial:K, rabenseifner or shm'),
      )
      .default({}),
    segment: auto(byteSize),
    /**
     * As `bcast.shm`, for reduces of at most 8 KiB: every rank deposits its data, the root
     * combines the deposits in rank order. `false`: the algorithms of the levels.
     */
    shm: z.boolean().default(true),
  })
  .strict();

const allgatherCollective = z
  .object({
    levels: z
      .record(
        levelKey,
        z
          .string()
          .regex(/^(auto|ring|recursive-doubling|bruck|neighbor-exchange|shm)$/, 'expected auto, ring, recursive-doubling, bruck, neighbor-exchange or shm'),
      )
      .default({}),
    segment: auto(byteSize),
    /**
     * In a job on one node without configured levels, allgathers go through the node-wide
     * shared area of `allreduce.shm` (native/src/shm/shm_allreduce.h), in rounds of 64 KiB columns:
     * every rank deposits its column, then copies every other one out. `every-rank`: each rank
     * waits for every deposit itself (blocks up to 4 KiB; larger ones take the schedules);
     * `last-arrival`: the last to arrive tells the others (every size). `true`: as
     * `allreduce.shm: true` picks; `false`: the schedules of the levels.
     */
    shm: z.union([z.boolean(), z.enum(['every-rank', 'last-arrival'])]).default(true),
  })
  .strict();

/** Gather and scatter: each level's algorithm and the column segment (of every rank's block). */
const gatherCollective = z
  .object({
    levels: z.record(levelKey, z.string().regex(/^(auto|flat|binomial)$/, 'expected auto, flat or binomial')).default({}),
    segment: auto(byteSize),
  })
  .strict();

const barrierCollective = z
  .object({
    /**
     * Each level's barrier: central-counter, combining-tree:K, dissemination; `auto`: the
     * algorithm S4's LogP model predicts fastest for the group's size and link (`model`).
     */
    levels: z
      .record(
        levelKey,
        z
          .string()
          .regex(
            /^(auto|central-counter|combining-tree:([2-9]|[1-9][0-9]+)|dissemination)$/,
            'expected auto, central-counter, combining-tree:K or dissemination',
          ),
      )
      .default({}),
  })
  .strict();

const allreduceCollective = z
  .object({
    /**
     * `reduce-allreduce-bcast` (S3 §5.1): reduce inside the lower levels, allreduce among the top
     * group, bcast back down. `reduce-bcast` (S3 §5.2): reduce to rank 0, bcast from it.
     */
    algorithm: z.enum(['auto', 'reduce-allreduce-bcast', 'reduce-bcast']).default('auto'),
    /** The top group's allreduce: recursive doubling (small messages) or Rabenseifner's reduce-scatter + allgather (large). */
    top: z.enum(['auto', 'recursive-doubling', 'rabenseifner']).default('auto'),
    segment: auto(byteSize),
    /**
     * In a job on one node, allreduce (and barrier) of at most 8 KiB through one shared area
     * (native/src/shm/shm_allreduce.h); levels do not apply. Every rank deposits its data, then
     * `every-rank`: each rank combines all deposits itself; `last-arrival`: the last rank to
     * arrive combines them and publishes the result. Both combine in rank order. `true`: every-rank
     * while each rank has a core (at most 8 ranks), else last-arrival. `false`: the schedules above.
     */
    shm: z.union([z.boolean(), z.enum(['every-rank', 'last-arrival'])]).default(true),
  })
  .strict();

/**
 * Reduce-scatter: its lower levels run the reduce's and the scatter's algorithms and segments;
 * what is its own is the top group's algorithm on the rank blocks (`reduceScatterTop`,
 * group-reduce-scatter.ts).
 */
const reduceScatterCollective = z
  .object({
    /**
     * The top group's reduce-scatter: `ring` (n − 1 pairwise exchanges of one member's share) or
     * `recursive-halving` (log2 n exchanges of halving ranges, folded to a power of two);
     * `auto`: the model's choice per size. A plan without a top group of several members
     * has nothing to choose (its ranks share one group below, or there is one rank).
     */
    top: z.enum(['auto', 'ring', 'recursive-halving']).default('auto'),
  })
  .strict();

/**
 * Alltoall in a job on one node: `pairwise` (p − 1 exchanges, one block each) or `bruck`
 * (⌈log2 p⌉ packed exchanges, for small blocks); `auto`: the model's choice per block size.
 * Across nodes the node-aggregated hierarchical form runs whatever this says (the placement
 * decides it, alltoall.ts), and alltoallv always runs pairwise on one node (Bruck needs equal
 * blocks).
 */
const alltoallCollective = z
  .object({
    algorithm: z.enum(['auto', 'pairwise', 'bruck']).default('auto'),
  })
  .strict();

const collectiveTuning = z
  .object({
    /**
     * Small blocking allreduces, allgathers and barriers of a one-node job that go through the
     * node-wide shared area with the every-rank protocol run that protocol in JavaScript, without
     * a call into the addon (src/runtime/fast-path.ts); `false`: every call goes through the
     * addon. A choice of each rank's own: ranks with different settings work together.
     */
    jsFastPath: z.boolean().default(true),
  })
  .strict();

/**
 * The cost model of every `auto` choice (algorithms/cost-model.ts): LogGP parameters of each kind
 * of link, measured by `topocoll tune`; defaults from the default machine profile.
 */
const links = z
  .object({
    /** Shared-memory channels between ranks of one node. */
    shm: withDefaults(linkModelFields, PROFILE.model.links.shm),
    /** topocoll's TCP links between nodes. */
    tcp: withDefaults(linkModelFields, PROFILE.model.links.tcp),
    /** MPI between nodes (transport: mpi, createCommunicator over an MPI layer); null: as tcp. */
    mpi: linkModel.nullable().default(null),
  })
  .strict();

const model = z
  .object({
    /** Fixed µs of every collective call (entering the engine, checks, publishing the call). */
    callUs: z.number().nonnegative().default(PROFILE.model.callUs),
    /** Bytes per µs one rank applies a reduction operator at. */
    combineBytesPerUs: z.number().positive().default(PROFILE.model.combineBytesPerUs),
    links: links.prefault({}),
    /** The links between ranks of a node with more ranks than cores (measured with two ranks on one core). */
    oversubscribed: z
      .object({
        shm: withDefaults(linkModelFields, PROFILE.model.oversubscribed.shm),
        tcp: withDefaults(linkModelFields, PROFILE.model.oversubscribed.tcp),
      })
      .strict()
      .prefault({}),
    /** A level whose links differ from its kind's (a slower spine switch): its own parameters, every field given. */
    levels: z.record(levelKey, linkModel).default({}),
  })
  .strict();

/**
 * Which path a call takes (src/runtime/router.ts): the sizes where two paths' measured times
 * cross, from the default machine profile. Set when the communicator is made; every rank of a
 * job must give the same `windows`, `sharedArea` and `scan` — the plan hash holds them, so ranks
 * that differ get EMISMATCH (the fast path is each rank's own choice, outside the hash).
 */
const routing = z
  .object({
    fastPath: withDefaults(fastPathFields, PROFILE.routing.fastPath),
    windows: z
      .object({
        /** A core per rank. */
        dedicated: withDefaults(windowThresholdFields, PROFILE.routing.windows.dedicated),
        /** More ranks than cores on the node. */
        shared: withDefaults(windowThresholdFields, PROFILE.routing.windows.shared),
      })
      .strict()
      .prefault({}),
    sharedArea: withDefaults(sharedAreaFields, PROFILE.routing.sharedArea),
    scan: withDefaults(scanRoutingFields, PROFILE.routing.scan),
  })
  .strict();

/**
 * What carries the messages between nodes for init(): `tcp`, topocoll's own links (connected
 * through the rendezvous); `mpi`, MPI through topocoll/mpi (init() then sets up over
 * MPI_COMM_WORLD, as createCommunicator does over any layer: no rendezvous, no port).
 */
const transport = z.enum(['tcp', 'mpi']);

export const configSchema = z
  .object({
    transport: transport.default('tcp'),
    levels,
    network: network.default({ source: 'auto', file: null }),
    node: node.default({ identity: 'auto' }),
    topology: topology.default({ source: 'auto', hwlocXml: null, locality: null }),
    timeouts: timeouts.default({ initMs: 30_000, collectiveMs: 600_000 }),
    scheduler: scheduler.default({ sliceUs: 100 }),
    waits: waits.default({ mode: 'spin', remoteSpinUs: 50 }),
    shm: shm.prefault({}),
    bcast: bcastCollective.prefault({}),
    reduce: reduceCollective.prefault({}),
    allreduce: allreduceCollective.prefault({}),
    allgather: allgatherCollective.prefault({}),
    gather: gatherCollective.prefault({}),
    scatter: gatherCollective.prefault({}),
    reduceScatter: reduceScatterCollective.prefault({}),
    alltoall: alltoallCollective.prefault({}),
    barrier: barrierCollective.prefault({}),
    collectives: collectiveTuning.prefault({}),
    model: model.prefault({}),
    routing: routing.prefault({}),
  })
  .strict();

/** A validated configuration with every default filled in. */
export type TopocollConfig = z.infer<typeof configSchema>;
/** What a user may write: every key optional. */
export type TopocollConfigInput = z.input<typeof configSchema>;

/** An object schema whose every field defaults to the profile's value (a file may give any subset). */
function withDefaults<F extends Record<string, z.ZodNumber>>(fields: F, defaults: { [K in keyof F]: number }) {
  const shape = Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, f.default(defaults[k as keyof F])])) as {
    [K in keyof F]: z.ZodDefault<F[K]>;
  };
  return z
    .object(shape)
    .strict()
    .prefault({} as never);
}
