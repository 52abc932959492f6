// Generated from config/default.yaml and config/profiles/default.yaml by scripts/gen-defaults.mjs — do not edit: change them and run `npm run gen:defaults`.

/** config/default.yaml as its YAML parses (validated where it is used, src/config/load.ts). */
export const DEFAULT_CONFIG_VALUES: unknown = {
  transport: 'tcp',
  levels: {
    core: { enabled: true },
    l1: { enabled: true },
    l2: { enabled: true },
    l3: { enabled: true },
    numa: { enabled: true },
    socket: { enabled: true },
    node: { enabled: true },
  },
  network: { source: 'auto', file: null },
  node: { identity: 'auto' },
  topology: { source: 'auto', hwlocXml: null, locality: null },
  timeouts: { initMs: 30000, collectiveMs: 600000 },
  scheduler: { sliceUs: 100 },
  waits: { mode: 'spin', remoteSpinUs: 50 },
  shm: {
    budgetBytes: 'auto',
    channelBytes: 'auto',
    channelPoolBytes: 'auto',
    membarrier: true,
    bcast: { enabled: true, queueBytes: 'auto', fragmentBytes: 'auto', sets: 2, tree: 'auto' },
    model: { copyBytesPerUs: 25600, largeCopyBytesPerUs: 11500, largeBytes: 8388608, notifyUs: 0.19, fragmentUs: 0.065, callUs: 0 },
  },
  bcast: { algorithm: 'levels', pollMicros: 0, levels: {}, segment: 'auto', shm: true },
  reduce: { levels: {}, segment: 'auto', shm: true },
  allreduce: { algorithm: 'auto', top: 'auto', segment: 'auto', shm: true },
  allgather: { levels: {}, segment: 'auto', shm: true },
  reduceScatter: { top: 'auto' },
  alltoall: { algorithm: 'auto' },
  barrier: { levels: {} },
  collectives: { jsFastPath: true },
  model: {
    callUs: 0.18,
    combineBytesPerUs: 340000,
    links: {
      shm: { L: 0.15, os: 0.076, or: 0.026, g: 0.079, G: 0.00004, Gx: 0.000072 },
      tcp: { L: 0.22, os: 4.5, or: 0.96, g: 4.5, G: 0.00018, Gx: 0.00036 },
      mpi: null,
    },
    oversubscribed: {
      shm: { L: 2.1, os: 0.023, or: 0.034, g: 0.048, G: 0.000055, Gx: 0.00012 },
      tcp: { L: 8.4, os: 1.1, or: 0.95, g: 1.8, G: 0.00024, Gx: 0.00053 },
    },
    levels: {},
  },
  routing: {
    fastPath: { copyMaxBytes: 1024, combineMaxBytes: 64 },
    windows: { dedicated: { bcast: 65536, allreduce: 65536, allgather: 8192 }, shared: { bcast: 524288, allreduce: 131072, allgather: 131072 } },
    sharedArea: { everyRankAllgatherMaxBytes: 4096 },
    scan: { segmentBytes: 131072 },
  },
};

/** config/profiles/default.yaml as its YAML parses (validated where it is used, src/config/machine-profiles.ts). */
export const DEFAULT_PROFILE_VALUES: unknown = {
  shmModel: { copyBytesPerUs: 25600, largeCopyBytesPerUs: 11500, largeBytes: 8388608, notifyUs: 0.19, fragmentUs: 0.065, callUs: 0 },
  model: {
    callUs: 0.18,
    combineBytesPerUs: 340000,
    links: { shm: { L: 0.15, os: 0.076, or: 0.026, g: 0.079, G: 0.00004, Gx: 0.000072 }, tcp: { L: 0.22, os: 4.5, or: 0.96, g: 4.5, G: 0.00018, Gx: 0.00036 } },
    oversubscribed: {
      shm: { L: 2.1, os: 0.023, or: 0.034, g: 0.048, G: 0.000055, Gx: 0.00012 },
      tcp: { L: 8.4, os: 1.1, or: 0.95, g: 1.8, G: 0.00024, Gx: 0.00053 },
    },
  },
  routing: {
    fastPath: { copyMaxBytes: 1024, combineMaxBytes: 64 },
    windows: { dedicated: { bcast: 65536, allreduce: 65536, allgather: 8192 }, shared: { bcast: 524288, allreduce: 131072, allgather: 131072 } },
    sharedArea: { everyRankAllgatherMaxBytes: 4096 },
    scan: { segmentBytes: 131072 },
  },
};
