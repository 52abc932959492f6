import { NativeCollective, type NativeAllgatherCall } from '../native.js';
import { datatypeOf } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type InPlace } from './call-context.js';
import { rootedDescriptors } from './rooted.js';
import { blockOf, checkWhole } from './gather.js';

/**
 * scatter: the root's `send` holds size·n elements in rank order; rank r receives block r in
 * `recv` (n = recv.length, the same on every rank). `send` is read at the root only (null
 * elsewhere); IN_PLACE as recv at the root: its block stays in send (n = send.length / size).
 * scatterv: rank r receives `counts[r]` elements (its `recv` holds at least as many), the blocks
 * one after another in rank order in the root's `send`; every rank passes the same `counts`.
 * Paths as gather's: the fast path, else the shared area's scatter or the schedule (hierarchical.ts,
 * scatterSchedule).
 */
export const [scatter, scatterv] = rootedDescriptors<TypedArray | null, TypedArray | InPlace>('scatter', scatterCall, scatterFast);

/** A checked blocking scatter through the fast path (small, one node, nothing pending); false: not taken. */
function scatterFast(ctx: CallContext, call: NativeAllgatherCall): boolean {
  const own = call.recv as TypedArray;
  if (ctx.asyncPending !== 0 || !ctx.router.fastScatter(call.count * ctx.size * own.BYTES_PER_ELEMENT)) return false;
  const send = call.send as TypedArray | null;
  if (send !== null && send !== own) ctx.ensureApart(send, own, 'Pass IN_PLACE as recv at the root to leave its block in send.');
  return ctx.fast!.scatter(send, own, call.count, call.dtype, call.root!, call.planHash);
}

/** Checks a scatter's arguments (with `table`: scatterv's counts, their sum in ctx.blockTotal) and fills the native call. */
function scatterCall(
  ctx: CallContext,
  send: TypedArray | null,
  recv: TypedArray | InPlace,
  table: Float64Array | undefined,
  root: number,
): NativeAllgatherCall {
  ctx.ensureOpen();
  ctx.checkRoot(root);
  const atRoot = ctx.rank === root;
  if (recv === IN_PLACE && !atRoot)
    throw ctx.argumentError('EINVAL', 'IN_PLACE is only valid at the root of a scatter', 'Pass a receive buffer on the other ranks.');
  if (atRoot && (send === null || send === undefined)) throw ctx.argumentError('EINVAL', 'the root of a scatter needs a send buffer');
  const type = datatypeOf(recv === IN_PLACE ? send : recv, recv === IN_PLACE ? 'send' : 'recv');
  const count = blockOf(ctx, recv, atRoot ? send : null, table, 'scatter');
  if (atRoot) checkWhole(ctx, send!, 'send', type, count, table, 'scatter');
  if (atRoot && send === recv && count > 0)
    throw ctx.argumentError('EINVAL', 'send and recv are the same array', 'Pass IN_PLACE as recv at the root to leave its block in send.');
  const total = table === undefined ? count * ctx.size : ctx.blockTotal;
  const p = ctx.plans.rooted('scatter', root, total * type.bytes, type.bytes);
  const own = recv === IN_PLACE ? send! : recv;
  return ctx.rootedCall(NativeCollective.scatter, root, p, atRoot ? send : null, own, table === undefined ? count : 0, type, table);
}
