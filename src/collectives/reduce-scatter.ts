import { NativeCollective, type NativeAllgatherCall, type NativeJob } from '../native.js';
import { datatypeOf, isUserOp, nativeUserOp, reduceOpCode } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type CollectiveDescriptor, type InPlace, type Operator } from './call-context.js';

/**
 * reduceScatterBlock: every rank's `send` (size·n elements) combined element-wise with `op`;
 * rank r receives block r of the result (n = recv.length elements) in `recv`. IN_PLACE as send:
 * the input is `recv` (size·n) and the result its first n elements (MPI's rule). A user operator
 * runs on the calling thread in every form; a non-commutative one in rank order. Paths: the
 * JavaScript fast path (small, blocking, built-in operator, one node), else the plans'
 * reduce-scatter — the shared area's (small, one node) or the schedules (hierarchical.ts,
 * reduceScatterSchedules).
 */
export const reduceScatterBlock: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray, op: Operator]> = {
  name: 'reduceScatterBlock',
  sync(ctx, send, recv, op) {
    const call = reduceScatterCall(ctx, send, recv, undefined, op);
    // The fast path (small, built-in operator, one node, nothing pending).
    if (call.user === undefined && ctx.asyncPending === 0 && ctx.router.fastReduceScatter(call.count * ctx.size * recv.BYTES_PER_ELEMENT)) {
      const input = call.send as TypedArray;
      if (input !== recv) ctx.ensureApart(input, recv, 'Pass IN_PLACE as send when recv holds the input.');
      if (ctx.fast!.reduceScatter(input, recv, call.count, call.dtype, call.op!, call.planHash)) return;
    }
    ctx.engine.runAllgather(call);
  },
  queue(ctx, send, recv, op): NativeJob | undefined {
    if (isUserOp(op)) return void reduceScatterBlock.sync(ctx, send, recv, op);
    return ctx.engine.runAllgatherAsync(reduceScatterCall(ctx, send, recv, undefined, op));
  },
  // A user operator's call has ended when the form returns: nothing to hold.
  buffers: (send, recv, op) => (isUserOp(op) ? [] : [send, recv]),
};

/**
 * reduceScatter: the input holds the blocks of every rank one after another (`counts[r]`
 * elements for rank r); rank r receives its block of the result in `recv` (at least counts[r]
 * elements). IN_PLACE: the input is `recv`, the result its first counts[rank] elements. Every
 * rank passes the same `counts`.
 */
export const reduceScatter: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>, op: Operator]> = {
  name: 'reduceScatter',
  sync(ctx, send, recv, counts, op) {
    ctx.engine.runAllgather(reduceScatterCall(ctx, send, recv, ctx.blockCounts(counts), op));
  },
  queue(ctx, send, recv, counts, op): NativeJob | undefined {
    if (isUserOp(op)) return void reduceScatter.sync(ctx, send, recv, counts, op);
    // Its own copy: the call may start after the caller changed `counts`.
    return ctx.engine.runAllgatherAsync(reduceScatterCall(ctx, send, recv, Float64Array.from(ctx.blockCounts(counts)), op));
  },
  buffers: (send, recv, _counts, op) => (isUserOp(op) ? [] : [send, recv]),
};

/** Checks a reduce-scatter's arguments (with `table`: the counts, their sum in ctx.blockTotal) and fills the native call. */
function reduceScatterCall(ctx: CallContext, send: TypedArray | InPlace, recv: TypedArray, table: Float64Array | undefined, op: Operator): NativeAllgatherCall {
  ctx.ensureOpen();
  const type = datatypeOf(recv, 'recv');
  const inPlace = send === IN_PLACE;
  const input = inPlace ? recv : send;
  if (!inPlace) {
    const sendType = datatypeOf(send, 'send');
    if (sendType !== type) throw ctx.argumentError('EINVAL', `send is ${sendType.name} but recv is ${type.name}`);
    if (send === recv && send.length > 0)
      throw ctx.argumentError('EINVAL', 'send and recv are the same array', 'Pass IN_PLACE as send when recv holds the input.');
  }
  let count: number;
  let total: number;
  if (table === undefined) {
    count = inPlace ? recv.length / ctx.size : recv.length;
    if (!Number.isInteger(count))
      throw ctx.argumentError('EINVAL', `with IN_PLACE recv holds every rank's block, but its ${recv.length} elements do not divide among ${ctx.size} ranks`);
    total = count * ctx.size;
  } else {
    count = 0;
    total = ctx.blockTotal;
    const own = table[ctx.rank]!;
    if (!inPlace && recv.length < own) throw ctx.argumentError('EINVAL', `recv has ${recv.length} elements but counts[${ctx.rank}] is ${own}`);
  }
  if (input.length !== total && !(inPlace && table !== undefined && input.length >= total))
    throw ctx.argumentError('EINVAL', `${inPlace ? 'recv' : 'send'} has ${input.length} elements but the reduce-scatter's blocks hold ${total}`);
  const user = isUserOp(op);
  const p = ctx.plans.reduceScatter(total * type.bytes, type.bytes, user ? ctx.checkOrder(op) : true);
  const call = ctx.rootedCall(NativeCollective.reduceScatter, 0, p, input, recv, count, type, table);
  if (user) call.user = nativeUserOp(op, type);
  else call.op = reduceOpCode(op, type);
  return call;
}
