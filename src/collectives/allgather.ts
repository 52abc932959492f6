import type { NativeJob } from '../native.js';
import type { AllgatherCallPlan } from '../runtime/collective-plans.js';
import { datatypeOf, type Datatype } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type CollectiveDescriptor, type InPlace } from './call-context.js';

/**
 * allgather: every rank's `send` gathered in rank order into `recv` on every rank (rank r's n
 * elements at [r·n, (r+1)·n)); IN_PLACE as send: this rank's block is already at its place in
 * recv. Paths: the JavaScript fast path (small blocks, blocking, one node), the window
 * allgather (this rank's block in a window, the largest block large enough, one node: tagged),
 * else the plans' schedules (shared area or levels).
 */
export const allgather: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray]> = {
  name: 'allgather',

  sync(ctx, send, recv) {
    const type = checkAllgather(ctx, send, recv, undefined);
    const count = send === IN_PLACE ? recv.length / ctx.size : send.length;
    if (ctx.asyncPending === 0 && ctx.router.fastAllgather(count * type.bytes)) {
      if (send !== IN_PLACE && (send !== ctx.apartSend || recv !== ctx.apartRecv))
        ctx.checkApart(send, recv, "Pass IN_PLACE as send when this rank's block is already in recv.");
      if (ctx.fast!.allgather(send === IN_PLACE ? recv : send, recv, count, type.code, ctx.planHash)) return;
    }
    const own = send === IN_PLACE ? recv : send;
    const p = allgatherPlan(ctx, own, count * ctx.size * type.bytes, type.bytes, count * type.bytes);
    ctx.engine.runAllgather(ctx.allgatherCall(p, own, recv, count, type, undefined));
  },

  queue(ctx, send, recv): NativeJob {
    const type = checkAllgather(ctx, send, recv, undefined);
    const count = send === IN_PLACE ? recv.length / ctx.size : send.length;
    const own = send === IN_PLACE ? recv : send;
    const p = allgatherPlan(ctx, own, count * ctx.size * type.bytes, type.bytes, count * type.bytes);
    return ctx.engine.runAllgatherAsync(ctx.allgatherCall(p, own, recv, count, type, undefined));
  },

  buffers: (send, recv) => [send, recv],
};

/**
 * allgatherv: rank r contributes `counts[r]` elements (its `send`), placed in rank order one after
 * another in `recv` on every rank; every rank passes the same `counts` (others get EMISMATCH: the
 * addon folds them into the call's header). IN_PLACE: this rank's block is already at its place.
 */
export const allgatherv: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>]> = {
  name: 'allgatherv',

  sync(ctx, send, recv, counts) {
    const table = ctx.blockCounts(counts);
    const type = checkAllgather(ctx, send, recv, table);
    const own = send === IN_PLACE ? recv : send;
    const p = allgatherPlan(ctx, own, ctx.blockTotal * type.bytes, type.bytes, ctx.blockLargest * type.bytes);
    ctx.engine.runAllgather(ctx.allgatherCall(p, own, recv, 0, type, table));
  },

  queue(ctx, send, recv, counts): NativeJob {
    // Its own copy: the call may start after the caller changed `counts`.
    const table = Float64Array.from(ctx.blockCounts(counts));
    const type = checkAllgather(ctx, send, recv, table);
    const own = send === IN_PLACE ? recv : send;
    const p = allgatherPlan(ctx, own, ctx.blockTotal * type.bytes, type.bytes, ctx.blockLargest * type.bytes);
    return ctx.engine.runAllgatherAsync(ctx.allgatherCall(p, own, recv, 0, type, table));
  },

  buffers: (send, recv) => [send, recv],
};

/** Checks an allgather's buffers (with `table`: allgatherv's counts, their sum in ctx.blockTotal); returns the datatype. */
export function checkAllgather(ctx: CallContext, send: TypedArray | InPlace, recv: TypedArray, table: Float64Array | undefined): Datatype {
  ctx.ensureOpen();
  const type = datatypeOf(recv, 'recv');
  const own = table === undefined ? (send === IN_PLACE ? recv.length / ctx.size : send.length) : table[ctx.rank]!;
  const total = table === undefined ? own * ctx.size : ctx.blockTotal;
  if (send !== IN_PLACE) {
    const sendType = datatypeOf(send, 'send');
    if (sendType !== type) throw ctx.argumentError('EINVAL', `send is ${sendType.name} but recv is ${type.name}`);
    if (send === recv && send.length > 0)
      throw ctx.argumentError('EINVAL', 'send and recv are the same array', "Pass IN_PLACE as send when this rank's block is already in recv.");
    if (table !== undefined && send.length !== own) throw ctx.argumentError('EINVAL', `send has ${send.length} elements but counts[${ctx.rank}] is ${own}`);
  } else if (table === undefined && !Number.isInteger(own)) {
    throw ctx.argumentError('EINVAL', `with IN_PLACE recv holds every rank's block, but its ${recv.length} elements do not divide among ${ctx.size} ranks`);
  }
  if (recv.length < total) throw ctx.argumentError('EINVAL', `recv has ${recv.length} elements but the allgather gathers ${total}`);
  return type;
}

/**
 * The plan of an allgather whose result holds `bytes`, at most `largest` from one rank: the
 * window allgather when the router sends it there (this rank's block, `own`: its send, or recv
 * for IN_PLACE, in a shared window, the largest block large enough) and the job is on one
 * node; else the plans'. Every rank decides alike when every rank passes a window (a rank that
 * does not gets EMISMATCH: allgatherCall tags window calls).
 */
function allgatherPlan(ctx: CallContext, own: TypedArray, bytes: number, elem: number, largest: number): AllgatherCallPlan {
  const windowed = ctx.router.windowAllgather(own, largest) ? ctx.plans.windowAllgather() : undefined;
  return windowed ?? ctx.plans.allgather(bytes, elem, largest);
}
