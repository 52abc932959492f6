import { z } from 'zod';

/**
 * The configuration schema — the single source of truth for what a topocoll YAML file may
 * contain, its defaults and its types. Every section is strict: an unknown key is an error
 * (a typo must not silently fall back to a default).
 */

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
      .regex(/^(auto|short-hostname|hostname|slurm|env:[A-Za-z_][A-Za-z0-9_]*|name:\S+)$/, 'expected auto, short-hostname, hostname, slurm, env:VAR or name:LITERAL')
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
  })
  .strict();

const shm = z
  .object({
    /** Bytes of shared memory per node for the channels between local ranks. */
    budgetBytes: z.number().int().min(1 << 20).default(64 << 20),
  })
  .strict();

export const configSchema = z
  .object({
    levels,
    network: network.default({ source: 'auto', file: null }),
    node: node.default({ identity: 'auto' }),
    topology: topology.default({ source: 'auto', hwlocXml: null, locality: null }),
    timeouts: timeouts.default({ initMs: 30_000 }),
    shm: shm.default({ budgetBytes: 64 << 20 }),
  })
  .strict();

/** A validated configuration with every default filled in. */
export type TopocollConfig = z.infer<typeof configSchema>;
/** What a user may write: every key optional. */
export type TopocollConfigInput = z.input<typeof configSchema>;
