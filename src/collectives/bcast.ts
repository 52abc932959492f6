import { NativeCollective, type NativeCall, type NativeJob } from '../native.js';
import type { Datatype } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { CallTag, type CallContext, type CollectiveDescriptor } from './call-context.js';

/**
 * bcast: every rank receives `buf` of rank `root`. Paths (runtime/router.ts): the JavaScript fast
 * path (small, blocking, one node), S1's one-sided bcast (`bcast.algorithm: one-sided`, `buf` in
 * this rank's part of a window), the window plans (`buf` in a window, large enough: S0's
 * single-copy mode), else the plans' schedules (shared area or levels).
 */
export const bcast: CollectiveDescriptor<[buf: TypedArray, root: number]> = {
  name: 'bcast',

  sync(ctx, buf, root) {
    const type = ctx.checkBuffer(buf, 'buf', root);
    if (ctx.asyncPending === 0 && ctx.router.fastBcast(buf.byteLength) && ctx.router.oneSidedTag(buf) === undefined) {
      if (ctx.fast!.bcast(buf, buf.length, type.code, root, ctx.planHash)) return;
    }
    ctx.engine.run(bcastCall(ctx, buf, type, root));
  },

  queue(ctx, buf, root): NativeJob {
    const type = ctx.checkBuffer(buf, 'buf', root);
    return ctx.engine.runAsync(bcastCall(ctx, buf, type, root));
  },

  buffers: (buf) => [buf],
};

/** The native call of a bcast of `buf`: on the plans' schedules, unless it runs one-sided or on windows. */
function bcastCall(ctx: CallContext, buf: TypedArray, type: Datatype, root: number): NativeCall {
  if (ctx.router.oneSidedTag(buf) !== undefined || ctx.router.windowBcast(buf)) return windowBcastCall(ctx, buf, type, root);
  return ctx.nativeCall(NativeCollective.bcast, ctx.plans.bcast(root, buf.byteLength, type.bytes), null, buf, buf.length, type.code, 0, root);
}

// Apart from the common path: V8 inlines a caller's callees up to a total size, and the common
// path's own calls (the plans, the addon's run) come first.
/** S1's one-sided bcast, or the window plans' bcast, tagged. */
function windowBcastCall(ctx: CallContext, buf: TypedArray, type: Datatype, root: number): NativeCall {
  const oneSided = ctx.router.oneSidedTag(buf);
  if (oneSided !== undefined) {
    const call = ctx.nativeCall(NativeCollective.bcast, ctx.plans.oneSidedBcast(root), null, buf, buf.length, type.code, 0, root);
    call.planHash = ctx.tagged(oneSided);
    return call;
  }
  const call = ctx.nativeCall(
    NativeCollective.bcast,
    ctx.windowBcastPlans().bcast(root, buf.byteLength, type.bytes),
    null,
    buf,
    buf.length,
    type.code,
    0,
    root,
  );
  call.planHash = ctx.tagged(CallTag.windowCall);
  return call;
}
