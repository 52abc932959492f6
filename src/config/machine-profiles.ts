/**
 * Machine profiles: the cost-model parameters measured on one named machine. They describe that
 * machine only; the configuration's defaults (schema.ts) take the profile named by
 * DEFAULT_MACHINE_PROFILE, and a configuration file overrides any value (`topocoll tune shm
 * --out FILE` and `topocoll tune barrier --out FILE` write one for the machine they run on).
 * bench/RESULTS.md records the runs behind each profile.
 */

export interface ShmModelProfile {
  /** Bytes per µs through one pipeline stage of the shared-memory bcast. */
  copyBytesPerUs: number;
  /** The same for messages above largeBytes, which no longer stay in the caches. */
  largeCopyBytesPerUs: number;
  /** Where copies stop being cache-resident (a quarter of the last-level cache). */
  largeBytes: number;
  /** µs to write a child's control block and for the child to see it. */
  notifyUs: number;
  /** Fixed µs per fragment per rank. */
  fragmentUs: number;
  /** Fixed µs per call. */
  callUs: number;
}

/** LogP parameters of one kind of link, in µs (S4): latency, send and receive overheads, gap. */
export interface LogPProfile {
  L: number;
  os: number;
  or: number;
  g: number;
}

export interface MachineProfile {
  /** `topocoll tune shm`. */
  shmModel: Readonly<ShmModelProfile>;
  /** `topocoll tune barrier` (TCP over loopback). */
  barrierLogP: { readonly shm: Readonly<LogPProfile>; readonly tcp: Readonly<LogPProfile> };
}

export const MACHINE_PROFILES = {
  /** A 2 vCPU AMD EPYC virtual machine with a 32 MiB L3. */
  'amd-epyc-2vcpu-vm': {
    shmModel: { copyBytesPerUs: 25600, largeCopyBytesPerUs: 11500, largeBytes: 8 << 20, notifyUs: 0.19, fragmentUs: 0.065, callUs: 0 },
    barrierLogP: {
      shm: { L: 0.61, os: 0.32, or: 0.29, g: 0.32 },
      tcp: { L: 0.65, os: 4.54, or: 0.98, g: 4.57 },
    },
  },
} as const satisfies Record<string, MachineProfile>;

export type MachineProfileName = keyof typeof MACHINE_PROFILES;

/** The profile behind the configuration's defaults (and config/default.yaml's values). */
export const DEFAULT_MACHINE_PROFILE: MachineProfileName = 'amd-epyc-2vcpu-vm';
