import { NativeCollective, type NativeCall, type NativeJob } from '../native.js';
import { datatypeOf, isUserOp, nativeUserOp, reduceOpCode } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type CollectiveDescriptor, type InPlace, type Operator } from './call-context.js';

/**
 * scan: rank r receives x0 op x1 op … op xr in `recv` (x: every rank's `send`, the same length
 * everywhere; IN_PLACE: `recv` holds the input). exscan: x0 op … op x(r−1); rank 0's `recv` is
 * left untouched (MPI leaves it undefined). Any associative operator, commutative or not, is
 * applied in rank order; a user operator runs on the calling thread in every form. Paths: the
 * JavaScript fast path (small, blocking, built-in operator, one node), else the shared area's scan
 * (small, one node) or the hierarchical scan over the rank-ordered plan (src/algorithms/scan.ts).
 */
function scanDescriptor(exclusive: boolean): CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray, op: Operator]> {
  const d: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray, op: Operator]> = {
    name: exclusive ? 'exscan' : 'scan',
    sync(ctx, send, recv, op) {
      const call = scanCall(ctx, exclusive, send, recv, op);
      // The fast path (small, built-in operator, one node, nothing pending).
      if (call.user === undefined && ctx.asyncPending === 0 && ctx.router.fastScan(recv.byteLength)) {
        const input = call.send as TypedArray;
        if (input !== recv) ctx.ensureApart(input, recv, 'Pass IN_PLACE as send when recv holds the input.');
        if (ctx.fast!.scan(input, recv, call.count, call.dtype, call.op, exclusive, call.planHash)) return;
      }
      ctx.engine.run(call);
    },
    queue(ctx, send, recv, op): NativeJob | undefined {
      if (isUserOp(op)) return void d.sync(ctx, send, recv, op);
      return ctx.engine.runAsync(scanCall(ctx, exclusive, send, recv, op));
    },
    // A user operator's call has ended when the form returns: nothing to hold.
    buffers: (send, recv, op) => (isUserOp(op) ? [] : [send, recv]),
  };
  return d;
}

export const scan = scanDescriptor(false);
export const exscan = scanDescriptor(true);

function scanCall(ctx: CallContext, exclusive: boolean, send: TypedArray | InPlace, recv: TypedArray, op: Operator): NativeCall {
  // Every check before anything is sent: closed, types and lengths, the operator.
  ctx.ensureOpen();
  const type = datatypeOf(recv, 'recv');
  const inPlace = send === IN_PLACE;
  const input = inPlace ? recv : send;
  ctx.checkPair(input, inPlace ? type : datatypeOf(input, 'send'), recv, type, inPlace);
  const user = isUserOp(op);
  // The scan combines in rank order on the rank-ordered plan: any operator, commutative or not.
  const code = user ? 0 : reduceOpCode(op, type);
  const call = ctx.nativeCall(
    exclusive ? NativeCollective.exscan : NativeCollective.scan,
    ctx.plans.scan(recv.byteLength, type.bytes),
    input,
    recv,
    recv.length,
    type.code,
    code,
    0,
  );
  if (user) call.user = nativeUserOp(op, type);
  return call;
}
