import { NativeCollective, type NativeJob } from '../native.js';
import type { CollectiveDescriptor } from './call-context.js';

/**
 * barrier: returns once every rank has entered it. Paths: the JavaScript fast path (blocking, one
 * node, the shared area's every-rank protocol), else the plans' (the shared area, or every
 * level's barrier algorithm: arrive bottom-up, release top-down).
 */
export const barrier: CollectiveDescriptor<[]> = {
  name: 'barrier',

  sync(ctx) {
    ctx.ensureOpen();
    if (ctx.asyncPending === 0 && ctx.router.fastBarrier() && ctx.fast!.barrier(ctx.planHash)) return;
    ctx.engine.run(ctx.nativeCall(NativeCollective.barrier, ctx.plans.barrier(), null, null, 0, 1, 0, 0));
  },

  queue(ctx): NativeJob {
    ctx.ensureOpen();
    return ctx.engine.runAsync(ctx.nativeCall(NativeCollective.barrier, ctx.plans.barrier(), null, null, 0, 1, 0, 0));
  },

  buffers: () => [],
};
