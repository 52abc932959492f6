import type { NativeAllgatherCall, NativeJob } from '../native.js';
import type { CallContext, CollectiveDescriptor } from './call-context.js';

/** Checks a call on rank blocks to or from `root` (`table`: the v form's counts) and fills the native call. */
export type RootedCall<S, R> = (ctx: CallContext, send: S, recv: R, table: Float64Array | undefined, root: number) => NativeAllgatherCall;

/** Runs a checked blocking call in JavaScript (runtime/fast-path.ts) where the router sends it; false: it did not run. */
export type FastCall = (ctx: CallContext, call: NativeAllgatherCall) => boolean;

/**
 * The descriptors of a collective on rank blocks to or from a root (gather, scatter) and of its
 * v form, from the function that checks one call and fills it: both run it on this thread or
 * queue it; the v form's queued call takes its own copy of the counts (the caller may change
 * them before it starts). The blocking form with equal blocks tries `fast` first.
 */
export function rootedDescriptors<S, R>(
  name: string,
  callOf: RootedCall<S, R>,
  fast: FastCall,
): [CollectiveDescriptor<[send: S, recv: R, root: number]>, CollectiveDescriptor<[send: S, recv: R, counts: ArrayLike<number>, root: number]>] {
  return [
    {
      name,
      sync: (ctx, send, recv, root) => {
        const call = callOf(ctx, send, recv, undefined, root);
        if (!fast(ctx, call)) ctx.engine.runAllgather(call);
      },
      queue: (ctx, send, recv, root): NativeJob => ctx.engine.runAllgatherAsync(callOf(ctx, send, recv, undefined, root)),
      buffers: (send, recv) => [send, recv],
    },
    {
      name: `${name}v`,
      sync: (ctx, send, recv, counts, root) => ctx.engine.runAllgather(callOf(ctx, send, recv, ctx.blockCounts(counts), root)),
      queue: (ctx, send, recv, counts, root): NativeJob =>
        ctx.engine.runAllgatherAsync(callOf(ctx, send, recv, Float64Array.from(ctx.blockCounts(counts)), root)),
      buffers: (send, recv) => [send, recv],
    },
  ];
}
