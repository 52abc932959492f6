import { NativeCollective, type NativeAllgatherCall } from '../native.js';
import { datatypeOf, type Datatype } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';
import { IN_PLACE, type CallContext, type InPlace } from './call-context.js';
import { rootedDescriptors } from './rooted.js';

/**
 * gather: every rank's `send` gathered in rank order into the root's `recv` (rank r's n elements
 * at [r·n, (r+1)·n), n = send.length, the same on every rank). `recv` is read at the root only
 * (null elsewhere); IN_PLACE as send at the root: its block is already at its place in recv
 * (n = recv.length / size). gatherv: rank r's `send` holds `counts[r]` elements, placed in rank
 * order one after another; every rank passes the same `counts` (others get EMISMATCH). Paths
 * (runtime/router.ts): the JavaScript fast path (small, blocking, equal blocks, one node), else the
 * plans' gather — the shared area's (small, one node) or the schedule (hierarchical.ts, gatherSchedule).
 */
export const [gather, gatherv] = rootedDescriptors<TypedArray | InPlace, TypedArray | null>('gather', gatherCall, gatherFast);

/** A checked blocking gather through the fast path (small, one node, nothing pending); false: not taken. */
function gatherFast(ctx: CallContext, call: NativeAllgatherCall): boolean {
  const own = call.send as TypedArray;
  if (ctx.asyncPending !== 0 || !ctx.router.fastGather(call.count * own.BYTES_PER_ELEMENT)) return false;
  const recv = call.recv as TypedArray | null;
  if (recv !== null && recv !== own) ctx.ensureApart(own, recv, 'Pass IN_PLACE as send at the root when its block is already in recv.');
  return ctx.fast!.gather(own, recv, call.count, call.dtype, call.root!, call.planHash);
}

/** Checks a gather's arguments (with `table`: gatherv's counts, their sum in ctx.blockTotal) and fills the native call. */
function gatherCall(ctx: CallContext, send: TypedArray | InPlace, recv: TypedArray | null, table: Float64Array | undefined, root: number): NativeAllgatherCall {
  ctx.ensureOpen();
  ctx.checkRoot(root);
  const atRoot = ctx.rank === root;
  if (send === IN_PLACE && !atRoot)
    throw ctx.argumentError('EINVAL', 'IN_PLACE is only valid at the root of a gather', 'Pass the block to send on the other ranks.');
  if (atRoot && (recv === null || recv === undefined)) throw ctx.argumentError('EINVAL', 'the root of a gather needs a receive buffer');
  const type = datatypeOf(send === IN_PLACE ? recv : send, send === IN_PLACE ? 'recv' : 'send');
  const count = blockOf(ctx, send, atRoot ? recv : null, table, 'gather');
  if (atRoot) checkWhole(ctx, recv!, 'recv', type, count, table, 'gather');
  if (atRoot && send === recv && count > 0)
    throw ctx.argumentError('EINVAL', 'send and recv are the same array', 'Pass IN_PLACE as send at the root when its block is already in recv.');
  const total = table === undefined ? count * ctx.size : ctx.blockTotal;
  const p = ctx.plans.rooted('gather', root, total * type.bytes, type.bytes);
  const own = send === IN_PLACE ? recv! : send;
  return ctx.rootedCall(NativeCollective.gather, root, p, own, atRoot ? recv : null, table === undefined ? count : 0, type, table);
}

/**
 * This rank's block length: its `mine` buffer's (gather: send; scatter: recv), or with IN_PLACE
 * at the root the whole vector's share (`whole`, which must divide among the ranks); gatherv and
 * scatterv: counts[rank], which `mine` must hold (gatherv: exactly).
 */
export function blockOf(
  ctx: CallContext,
  mine: TypedArray | InPlace,
  whole: TypedArray | null,
  table: Float64Array | undefined,
  what: 'gather' | 'scatter',
): number {
  const mineName = what === 'gather' ? 'send' : 'recv';
  const wholeName = what === 'gather' ? 'recv' : 'send';
  if (mine === IN_PLACE) {
    if (table !== undefined) return table[ctx.rank]!;
    const n = whole!.length / ctx.size;
    if (!Number.isInteger(n))
      throw ctx.argumentError(
        'EINVAL',
        `with IN_PLACE ${wholeName} holds every rank's block, but its ${whole!.length} elements do not divide among ${ctx.size} ranks`,
      );
    return n;
  }
  if (table === undefined) return mine.length;
  const own = table[ctx.rank]!;
  if (what === 'gather' ? mine.length !== own : mine.length < own)
    throw ctx.argumentError('EINVAL', `${mineName} has ${mine.length} elements but counts[${ctx.rank}] is ${own}`);
  return own;
}

/** The root's whole vector (`name`): `type`, and long enough for every block. */
export function checkWhole(
  ctx: CallContext,
  whole: TypedArray,
  name: string,
  type: Datatype,
  count: number,
  table: Float64Array | undefined,
  what: string,
): void {
  const wholeType = datatypeOf(whole, name);
  if (wholeType !== type)
    throw ctx.argumentError(
      'EINVAL',
      `send is ${what === 'gather' ? type.name : wholeType.name} but recv is ${what === 'gather' ? wholeType.name : type.name}`,
    );
  const total = table === undefined ? count * ctx.size : ctx.blockTotal;
  if (whole.length < total)
    throw ctx.argumentError('EINVAL', `${name} has ${whole.length} elements but the ${what} ${what === 'gather' ? 'gathers' : 'scatters'} ${total}`);
}
