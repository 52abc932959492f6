import { NativeCollective, type NativeCall, type NativeJob } from '../native.js';
import { datatypeOf, isUserOp, nativeUserOp, reduceOpCode, type Datatype, type UserOp } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { CallTag, IN_PLACE, type CallContext, type CollectiveDescriptor, type InPlace, type Operator } from './call-context.js';

/**
 * allreduce: every rank's `send` combined with `op`; every rank receives the result in `recv`
 * (IN_PLACE as send: `recv` holds the input). A user operator runs on the calling thread in every
 * form. Paths: the JavaScript fast path (small, blocking, built-in operator, one node), the
 * window allreduce (both buffers in windows, large enough, one node: tagged), else the plans'
 * schedules (shared area or levels; the rank-ordered plan for a non-commutative operator).
 */
export const allreduce: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray, op: Operator]> = {
  name: 'allreduce',

  sync(ctx, send, recv, op) {
    const input = send === IN_PLACE ? recv : send;
    const type = checkAllreduce(ctx, input, recv, send === IN_PLACE);
    if (isUserOp(op)) return allreduceWithUserOp(ctx, input, recv, type, op);
    const opCode = reduceOpCode(op, type);
    const bytes = recv.byteLength;
    if (ctx.asyncPending === 0 && ctx.router.fastAllreduce(bytes)) {
      if (send !== IN_PLACE && (input !== ctx.apartSend || recv !== ctx.apartRecv)) ctx.checkApart(input, recv, 'Pass IN_PLACE as send to reduce in place.');
      if (ctx.fast!.allreduce(input, recv, recv.length, type.code, opCode, ctx.planHash)) return;
    }
    ctx.engine.run(allreduceCall(ctx, input, recv, type, opCode));
  },

  queue(ctx, send, recv, op): NativeJob | undefined {
    if (isUserOp(op)) return void allreduce.sync(ctx, send, recv, op);
    const input = send === IN_PLACE ? recv : send;
    const type = checkAllreduce(ctx, input, recv, send === IN_PLACE);
    return ctx.engine.runAsync(allreduceCall(ctx, input, recv, type, reduceOpCode(op, type)));
  },

  // A user operator's call has ended when the form returns: nothing to hold.
  buffers: (send, recv, op) => (isUserOp(op) ? [] : [send, recv]),
};

function checkAllreduce(ctx: CallContext, input: TypedArray, recv: TypedArray, inPlace: boolean): Datatype {
  ctx.ensureOpen();
  const type = datatypeOf(recv, 'recv');
  ctx.checkPair(input, datatypeOf(input, 'send'), recv, type, inPlace);
  return type;
}

/** The native call of an allreduce with a built-in operator: the window allreduce, tagged, where the router sends it and the job is on one node. */
function allreduceCall(ctx: CallContext, input: TypedArray, recv: TypedArray, type: Datatype, opCode: number): NativeCall {
  const w = ctx.router.windowAllreduce(input, recv) ? ctx.plans.windowAllreduce() : undefined;
  const p = w ?? ctx.plans.allreduce(recv.byteLength, type.bytes, true);
  const call = ctx.nativeCall(NativeCollective.allreduce, p, input, recv, recv.length, type.code, opCode, 0);
  if (w !== undefined) call.planHash = ctx.tagged(CallTag.windowCall);
  return call;
}

// Apart from the built-in path, as reduce's (V8 inlines only small functions into their callers).
function allreduceWithUserOp(ctx: CallContext, input: TypedArray, recv: TypedArray, type: Datatype, op: UserOp): void {
  const p = ctx.plans.allreduce(recv.byteLength, type.bytes, ctx.checkOrder(op));
  const call = ctx.nativeCall(NativeCollective.allreduce, p, input, recv, recv.length, type.code, 0, 0);
  call.user = nativeUserOp(op, type);
  ctx.engine.run(call);
}
