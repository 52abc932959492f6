import { NativeCollective, type NativeAllgatherCall, type NativeJob } from '../native.js';
import { datatypeOf } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type CollectiveDescriptor, type InPlace } from './call-context.js';

/**
 * alltoall: block j of `send` goes to rank j, block i of `recv` came from rank i (n =
 * send.length / size elements per block, the same on every rank). IN_PLACE as send: the input is
 * `recv` (n = recv.length / size), overwritten by the result. Paths: the JavaScript fast path
 * (small, blocking, one node), else the plans' alltoall — the shared area's (small, one node) or
 * the schedule (alltoall.ts: pairwise or, for small blocks, Bruck on one node; hierarchical across
 * nodes).
 */
export const alltoall: CollectiveDescriptor<[send: TypedArray | InPlace, recv: TypedArray]> = {
  name: 'alltoall',
  sync: (ctx, send, recv) => {
    const call = alltoallCall(ctx, send, recv, undefined, undefined, false);
    // The fast path (small, one node, nothing pending); alltoallCall checked send and recv apart.
    const bytes = call.count * ctx.size * recv.BYTES_PER_ELEMENT;
    if (ctx.asyncPending === 0 && ctx.router.fastAlltoall(bytes) && ctx.fast!.alltoall(call.send as TypedArray, recv, call.count, call.dtype, call.planHash))
      return;
    ctx.engine.runAllgather(call);
  },
  queue: (ctx, send, recv): NativeJob => ctx.engine.runAllgatherAsync(alltoallCall(ctx, send, recv, undefined, undefined, false)),
  buffers: (send, recv) => [send, recv],
};

/**
 * alltoallv: `sendCounts[j]` elements of `send` go to rank j and `recvCounts[i]` elements of
 * `recv` come from rank i, the blocks packed one after another in rank order. Rank i's
 * sendCounts[j] must equal rank j's recvCounts[i] (else EMISMATCH on every rank). IN_PLACE as
 * send: the input is `recv`, laid out by `recvCounts` (MPI's rule: `sendCounts` is not read).
 */
export const alltoallv: CollectiveDescriptor<
  [send: TypedArray | InPlace, sendCounts: ArrayLike<number> | null, recv: TypedArray, recvCounts: ArrayLike<number>]
> = {
  name: 'alltoallv',
  sync: (ctx, send, sendCounts, recv, recvCounts) => ctx.engine.runAllgather(alltoallCall(ctx, send, recv, sendCounts, recvCounts, false)),
  // Its own copy of the counts: the call may start after the caller changed them.
  queue: (ctx, send, sendCounts, recv, recvCounts): NativeJob => ctx.engine.runAllgatherAsync(alltoallCall(ctx, send, recv, sendCounts, recvCounts, true)),
  buffers: (send, _sendCounts, recv) => [send, recv],
};

/** Reused by blocking alltoallv calls of a communicator of `size` ranks. */
const countsScratch = new WeakMap<CallContext, Float64Array>();

/** Checks an alltoall's arguments (alltoallv: with its counts) and fills the native call. */
function alltoallCall(
  ctx: CallContext,
  send: TypedArray | InPlace,
  recv: TypedArray,
  sendCounts: ArrayLike<number> | null | undefined,
  recvCounts: ArrayLike<number> | undefined,
  ownCounts: boolean,
): NativeAllgatherCall {
  ctx.ensureOpen();
  const v = recvCounts !== undefined;
  const type = datatypeOf(recv, 'recv');
  const inPlace = send === IN_PLACE;
  if (!inPlace) {
    const sendType = datatypeOf(send, 'send');
    if (sendType !== type) throw ctx.argumentError('EINVAL', `send is ${sendType.name} but recv is ${type.name}`);
    if (send === recv && send.length > 0)
      throw ctx.argumentError('EINVAL', 'send and recv are the same array', 'Pass IN_PLACE as send when recv holds the input.');
  }
  const input = inPlace ? recv : send;
  const p = ctx.size;
  let table: Float64Array | undefined;
  let count = 0;
  if (!v) {
    count = input.length / p;
    if (!Number.isInteger(count))
      throw ctx.argumentError('EINVAL', `${inPlace ? 'recv' : 'send'} has ${input.length} elements, which do not divide among ${p} ranks`);
    if (recv.length < count * p) throw ctx.argumentError('EINVAL', `recv has ${recv.length} elements but the alltoall receives ${count * p}`);
  } else {
    table = ownCounts ? new Float64Array(2 * p) : countsScratchOf(ctx, p);
    const received = readCounts(ctx, recvCounts, table, p, 'recvCounts');
    const sent = inPlace ? readCounts(ctx, recvCounts, table, 0, 'recvCounts') : readCounts(ctx, sendCounts, table, 0, 'sendCounts');
    if (input.length < sent) throw ctx.argumentError('EINVAL', `${inPlace ? 'recv' : 'send'} has ${input.length} elements but sendCounts sum to ${sent}`);
    if (recv.length < received) throw ctx.argumentError('EINVAL', `recv has ${recv.length} elements but recvCounts sum to ${received}`);
  }
  if (!inPlace) ctx.ensureApart(send, recv, 'Pass IN_PLACE as send when recv holds the input.');
  const collective = v ? NativeCollective.alltoallv : NativeCollective.alltoall;
  return ctx.rootedCall(collective, 0, ctx.plans.alltoall(count * type.bytes, v), inPlace ? recv : send, recv, count, type, table);
}

function countsScratchOf(ctx: CallContext, p: number): Float64Array {
  let t = countsScratch.get(ctx);
  if (t === undefined || t.length !== 2 * p) countsScratch.set(ctx, (t = new Float64Array(2 * p)));
  return t;
}

/** Copies `counts` (one per rank, non-negative integers) into `table` from `at`; returns their sum. */
function readCounts(ctx: CallContext, counts: ArrayLike<number> | null | undefined, table: Float64Array, at: number, name: string): number {
  const p = ctx.size;
  if (counts === null || typeof counts !== 'object' || counts.length !== p) {
    throw ctx.argumentError(
      'EINVAL',
      `alltoallv needs ${name} with one count per rank (${p}), got ${counts === null || typeof counts !== 'object' ? String(counts) : counts.length}`,
    );
  }
  let total = 0;
  for (let r = 0; r < p; r++) {
    const c = counts[r]!;
    if (!Number.isSafeInteger(c) || c < 0) throw ctx.argumentError('EINVAL', `alltoallv: ${name}[${r}] is ${c}, not a non-negative integer`);
    table[at + r] = c;
    total += c;
  }
  return total;
}
