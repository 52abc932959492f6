import { NativeCollective, type NativeJob } from '../native.js';
import { datatypeOf, isUserOp, nativeUserOp, reduceOpCode, type Datatype, type UserOp } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type CollectiveDescriptor, type InPlace, type Operator } from './call-context.js';

/**
 * reduce: every rank's `send` combined element-wise with `op` into `recv` at `root`. At the
 * root, `send` may be IN_PLACE (then `recv` is the input); elsewhere `recv` may be null. A user
 * operator runs on the calling thread in every form (it calls JavaScript). Paths: the
 * JavaScript fast path (small, blocking, built-in operator, one node), else the plans'
 * schedules (shared area or levels; the rank-ordered plan for a non-commutative operator).
 */
export const reduce: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray | null, op: Operator, root: number]> = {
  name: 'reduce',

  sync(ctx, send, recv, op, root) {
    const input = reduceInput(ctx, send, recv, root);
    const type = checkReduce(ctx, input, recv, send === IN_PLACE, root);
    const out = ctx.rank === root ? recv : null;
    if (isUserOp(op)) return reduceWithUserOp(ctx, input, out, type, op, root);
    const opCode = reduceOpCode(op, type);
    if (ctx.asyncPending === 0 && ctx.router.fastReduce(input.byteLength)) {
      if (out !== null && send !== IN_PLACE && (input !== ctx.apartSend || out !== ctx.apartRecv))
        ctx.checkApart(input, out, 'Pass IN_PLACE as send to reduce in place.');
      if (ctx.fast!.reduce(input, out, input.length, type.code, opCode, root, ctx.planHash)) return;
    }
    const p = ctx.plans.reduce(root, input.byteLength, type.bytes, true);
    ctx.engine.run(ctx.nativeCall(NativeCollective.reduce, p, input, out, input.length, type.code, opCode, root));
  },

  queue(ctx, send, recv, op, root): NativeJob | undefined {
    if (isUserOp(op)) return void reduce.sync(ctx, send, recv, op, root);
    const input = reduceInput(ctx, send, recv, root);
    const type = checkReduce(ctx, input, recv, send === IN_PLACE, root);
    const opCode = reduceOpCode(op, type);
    const p = ctx.plans.reduce(root, input.byteLength, type.bytes, true);
    return ctx.engine.runAsync(ctx.nativeCall(NativeCollective.reduce, p, input, ctx.rank === root ? recv : null, input.length, type.code, opCode, root));
  },

  // A user operator's call has ended when the form returns: nothing to hold.
  buffers: (send, recv, op) => (isUserOp(op) ? [] : [send, recv]),
};

/** The reduce input: `recv` when IN_PLACE (valid only at the root), else `send`. */
function reduceInput(ctx: CallContext, send: TypedArray | InPlace, recv: TypedArray | null, root: number): TypedArray {
  ctx.ensureOpen();
  ctx.checkRoot(root);
  if (send !== IN_PLACE) return send;
  if (ctx.rank !== root)
    throw ctx.argumentError('EINVAL', 'IN_PLACE is only valid at the root of a reduce', 'Pass the input buffer as send on the other ranks.');
  if (recv === null) throw ctx.argumentError('EINVAL', 'the root of a reduce needs a receive buffer');
  return recv;
}

function checkReduce(ctx: CallContext, input: TypedArray, recv: TypedArray | null, inPlace: boolean, root: number): Datatype {
  const type = datatypeOf(input, 'send');
  if (ctx.rank === root && recv === null) throw ctx.argumentError('EINVAL', 'the root of a reduce needs a receive buffer');
  if (recv !== null) ctx.checkPair(input, type, recv, datatypeOf(recv, 'recv'), inPlace);
  return type;
}

// The user-operator paths live apart from the built-in ones: V8 inlines a hot function into its
// caller only while the two stay small, and the latency path should not pay for code it skips.
function reduceWithUserOp(ctx: CallContext, input: TypedArray, out: TypedArray | null, type: Datatype, op: UserOp, root: number): void {
  const p = ctx.plans.reduce(root, input.byteLength, type.bytes, ctx.checkOrder(op));
  const call = ctx.nativeCall(NativeCollective.reduce, p, input, out, input.length, type.code, 0, root);
  call.user = nativeUserOp(op, type);
  ctx.engine.run(call);
}
