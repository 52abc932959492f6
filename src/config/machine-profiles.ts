/**
 * Machine profiles: the cost-model parameters measured on one named machine. They describe that
 * machine only; the configuration's defaults (schema.ts) take the profile named by
 * DEFAULT_MACHINE_PROFILE, and a configuration file overrides any value (`topocoll tune shm
 * --out FILE` and `topocoll tune barrier --out FILE` write one for the machine they run on).
 * bench/history/RESULTS-log-to-2026-11-24.md records the runs behind each profile.
 */

/**
 * Each profile: `shmModel`, the shared-memory bcast's cost model (shm.model, fields as in
 * algorithms/shm-bcast-model.ts's ShmCostModel), from `topocoll tune shm`; `barrierLogP`, S4's
 * LogP parameters of shared memory and of TCP (barrier.logp), from `topocoll tune barrier`.
 * schema.ts names every field, so a profile without one does not compile.
 */
export const MACHINE_PROFILES = {
  /** A 2 vCPU AMD EPYC virtual machine with a 32 MiB L3. */
  'amd-epyc-2vcpu-vm': {
    shmModel: { copyBytesPerUs: 25600, largeCopyBytesPerUs: 11500, largeBytes: 8 << 20, notifyUs: 0.19, fragmentUs: 0.065, callUs: 0 },
    barrierLogP: {
      shm: { L: 0.61, os: 0.32, or: 0.29, g: 0.32 },
      tcp: { L: 0.65, os: 4.54, or: 0.98, g: 4.57 },
    },
  },
} as const;

export type MachineProfileName = keyof typeof MACHINE_PROFILES;

/** The profile behind the configuration's defaults (and config/default.yaml's values). */
export const DEFAULT_MACHINE_PROFILE: MachineProfileName = 'amd-epyc-2vcpu-vm';
