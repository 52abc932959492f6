/**
 * The point-to-point layer a host messaging layer gives topocoll (createCommunicator): the
 * JavaScript form, and the native form (a topocoll_p2p_v1 struct, native/include/topocoll_p2p.h,
 * handed over as an External).
 */

/**
 * Messages between ranks 0 … size − 1 of the host layer. Two messages from one sender to one
 * receiver with the same tag must arrive in the order they were sent; topocoll needs nothing
 * else (no wildcards, no probe). A message longer than `maxBytes` is an error of that `recv`.
 *
 * Closing: a collective may return before the layer was handed its last sends (as in MPI, a
 * collective returns once this rank's buffers are free, not once its messages arrived). The
 * communicator's close() hands the layer every send still queued before it returns (calling
 * `send` on the spot) and keeps the process alive until those sends settle, at most the setup's
 * time limit (timeouts.initMs). The layer must deliver a message whose `send` settled even if
 * the process ends right after, and a close of its own (if it has one, called after the
 * communicators' close()) must let the sends in flight finish before ending its connections.
 */
export interface PointToPoint {
  readonly rank: number;
  readonly size: number;
  /**
   * Sends `data` (the layer may keep it: topocoll does not reuse it) to `peer` on `tag`; settles
   * once the message is on its way (it will be delivered even if this process ends then), or
   * rejects. May be called from within the communicator's close().
   */
  send(peer: number, tag: number, data: Uint8Array): Promise<void>;
  recv(peer: number, tag: number, maxBytes: number): Promise<Uint8Array>;
  /**
   * The first of the tags topocoll uses (default 0), which takes tagBase … tagBase + 3071:
   * communicator k made over this layer uses tagBase + 2k and tagBase + 2k + 1 (k = 0, 1, … in
   * the order they were created), sub-communicator j of those (split, dup) tagBase + 2048 + j.
   */
  readonly tagBase?: number;
  /**
   * A native topocoll_p2p_v1 (an External, e.g. from topocoll/mpi): when given, topocoll's
   * collectives call it from their own threads, so blocking (Sync) collectives work across nodes
   * too; `send`/`recv` then only carry the setup.
   */
  readonly native?: object;
}

/** A native layer alone (no JavaScript send/recv): topocoll runs its setup over the struct too. */
export interface NativePointToPoint {
  readonly native: object;
}

/** Communicators a layer can carry: each uses two tags. */
export const MAX_COMMUNICATORS_PER_LAYER = 1024;
/** Sub-communicators (split, dup) a layer can carry: each uses one tag (its setup runs over its parent). */
export const MAX_SUB_COMMUNICATORS_PER_LAYER = 1024;
/** The tags topocoll takes from tagBase on. */
export const LAYER_TAGS = 2 * MAX_COMMUNICATORS_PER_LAYER + MAX_SUB_COMMUNICATORS_PER_LAYER;

/** The tag of sub-communicator `slot` of a layer (every rank of its parent agreed on the slot). */
export function subCommunicatorTag(tagBase: number, slot: number): number {
  return tagBase + 2 * MAX_COMMUNICATORS_PER_LAYER + slot;
}

/** The tags of communicator `slot` of a layer: its collectives', and its setup's. */
export function communicatorTags(tagBase: number, slot: number): { collectives: number; setup: number } {
  return { collectives: tagBase + 2 * slot, setup: tagBase + 2 * slot + 1 };
}
