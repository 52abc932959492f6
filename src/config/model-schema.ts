// A namespace import, so the bundle (scripts/bundle.mjs) keeps only the parts of zod in use.
import * as z from 'zod';
import { SHARED_AREA_SLOT_DATA_BYTES } from '../abi.generated.js';

// zod compiles a schema's fast path (generated source, new Function) on its first parse; a
// process here parses a configuration and a machine profile or two, so compiling costs more
// than it could save. Set before any parse: every schema of topocoll is built on this module's
// import. (In the bundle this zod is topocoll's own copy; no user's schemas share the setting.)
z.config({ jitless: true });

/**
 * The cost-model parameters' shapes, without defaults: shared by the machine profiles (which
 * must give every value) and the configuration schema (which takes its defaults from a profile).
 */

/** LogGP parameters of one kind of link (algorithms/cost-model.ts's LinkModel), µs and µs per byte. */
export const linkModelFields = {
  L: z.number().nonnegative(),
  os: z.number().nonnegative(),
  or: z.number().nonnegative(),
  g: z.number().nonnegative(),
  G: z.number().nonnegative(),
  Gx: z.number().nonnegative(),
};
export const linkModel = z.object(linkModelFields).strict();

/** The S0 engine's model (algorithms/shm-bcast-model.ts's ShmCostModel). */
export const shmModelFields = {
  copyBytesPerUs: z.number().positive(),
  largeCopyBytesPerUs: z.number().positive(),
  largeBytes: z.number().int().positive(),
  notifyUs: z.number().positive(),
  fragmentUs: z.number().nonnegative(),
  callUs: z.number().nonnegative(),
};

/**
 * The largest calls the JavaScript fast path takes (src/runtime/router.ts), bytes: bcast,
 * allgather and gather (one rank's block), scatter and alltoall (the whole vector) copy; reduce,
 * allreduce, the scans and reduce-scatter (the whole vector) combine. Every deposit must fit the
 * shared area's slot.
 */
export const fastPathFields = {
  copyMaxBytes: z.number().int().nonnegative().max(SHARED_AREA_SLOT_DATA_BYTES),
  combineMaxBytes: z.number().int().nonnegative().max(SHARED_AREA_SLOT_DATA_BYTES),
};

/** The largest block of the node-wide shared area's every-rank allgather (src/runtime/router.ts), bytes. */
export const sharedAreaFields = {
  everyRankAllgatherMaxBytes: z.number().int().nonnegative(),
};

/** A scan's column segment where the reduce's choice is whole (src/runtime/collective-plans.ts, scan()), bytes. */
export const scanRoutingFields = {
  segmentBytes: z.number().int().positive(),
};

/** The smallest calls on shared windows that take the window algorithms, on one kind of node (src/runtime/router.ts), bytes. */
export const windowThresholdFields = {
  bcast: z.number().int().nonnegative(),
  allreduce: z.number().int().nonnegative(),
  allgather: z.number().int().nonnegative(),
};

/** A machine profile file (config/profiles/NAME.yaml). */
export const machineProfile = z
  .object({
    shmModel: z.object(shmModelFields).strict(),
    model: z
      .object({
        callUs: z.number().nonnegative(),
        combineBytesPerUs: z.number().positive(),
        links: z.object({ shm: linkModel, tcp: linkModel }).strict(),
        oversubscribed: z.object({ shm: linkModel, tcp: linkModel }).strict(),
      })
      .strict(),
    routing: z
      .object({
        fastPath: z.object(fastPathFields).strict(),
        windows: z.object({ dedicated: z.object(windowThresholdFields).strict(), shared: z.object(windowThresholdFields).strict() }).strict(),
        sharedArea: z.object(sharedAreaFields).strict(),
        scan: z.object(scanRoutingFields).strict(),
      })
      .strict(),
  })
  .strict();

export type MachineProfile = z.infer<typeof machineProfile>;
