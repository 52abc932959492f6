import { JsP2POperation } from '../abi.generated.js';
import { JsPointToPointBridge } from '../native.js';
import type { PointToPoint } from './point-to-point.js';

/** A JavaScript layer bridged into a native topocoll_p2p_v1 (bridgeJsLayer). */
export interface BridgedLayer {
  /** The struct, as an External. */
  readonly native: object;
  /**
   * What a communicator's close() calls once its engine is closed: hands the layer every
   * operation still queued in the bridge (so the sends of the collectives that returned are in
   * the layer before close() returns, and a `layer.close()` right after lets them finish), and
   * keeps the process alive until every send handed to the layer settled, at most `timeoutMs`.
   */
  readonly finishSends: (timeoutMs: number) => void;
}

/**
 * A JavaScript layer as a native topocoll_p2p_v1 (the addon's bridge, native/src/binding/js_p2p.h):
 * the executor's threads start operations, this thread runs the layer's send/recv and settles them.
 * Whatever the layer throws or rejects with fails that operation, and with it the collective
 * (EPEERLOST naming the peer and the tag).
 *
 * A collective may return before the layer has its last sends (they reach this thread through
 * the event loop, and nothing of the bridge keeps the process alive): finishSends, which the
 * communicator's close() calls, hands them over at once and keeps the process alive until they
 * settle.
 */
export function bridgeJsLayer(p2p: PointToPoint, tagBase: number): BridgedLayer {
  /** Sends handed to the layer and not settled yet (each never rejects). */
  const sending = new Set<Promise<void>>();
  const operate = (kind: JsP2POperation, id: number, peer: number, tag: number, payload: Uint8Array | number): void => {
    const isSend = kind === JsP2POperation.send;
    let operation: Promise<void>;
    // The layer's send/recv is called right here: a flush (close()) hands it the operation
    // before it returns, and so before the host can close the layer.
    try {
      operation = isSend
        ? Promise.resolve(p2p.send(peer, tag, payload as Uint8Array)).then(() => bridge.complete(id))
        : Promise.resolve(p2p.recv(peer, tag, payload as number)).then((bytes) => {
            if (!(bytes instanceof Uint8Array)) throw new TypeError(`recv resolved with ${typeof bytes}, not a Uint8Array`);
            bridge.complete(id, undefined, bytes);
          });
    } catch (e) {
      operation = Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    const settled = operation.catch((e: unknown) => bridge.complete(id, `the layer's ${isSend ? 'send' : 'recv'} failed: ${describe(e)}`));
    if (isSend) {
      sending.add(settled);
      void settled.then(() => sending.delete(settled));
    }
  };
  const bridge: JsPointToPointBridge = new JsPointToPointBridge(p2p.rank, p2p.size, tagBase, operate);
  return {
    native: bridge.native(),
    finishSends: (timeoutMs) => {
      bridge.flush();
      if (sending.size === 0) return;
      // A referenced timer keeps the process alive while the sends settle; it ends with them.
      const timer = setTimeout(() => undefined, timeoutMs);
      void Promise.allSettled([...sending]).then(() => clearTimeout(timer));
    },
  };
}

export function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
