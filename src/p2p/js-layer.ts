import { JsP2POperation } from '../abi.generated.js';
import { JsPointToPointBridge } from '../native.js';
import type { PointToPoint } from './point-to-point.js';

/**
 * A JavaScript layer as a native topocoll_p2p_v1 (the addon's bridge, native/src/binding/js_p2p.h):
 * the executor's threads start operations, this thread runs the layer's send/recv and settles them.
 * Whatever the layer throws or rejects with fails that operation, and with it the collective
 * (EPEERLOST naming the peer and the tag).
 */
export function bridgeJsLayer(p2p: PointToPoint, tagBase: number): object {
  const bridge: JsPointToPointBridge = new JsPointToPointBridge(p2p.rank, p2p.size, tagBase, (kind, id, peer, tag, payload) => {
    const operation =
      kind === JsP2POperation.send
        ? Promise.resolve()
            .then(() => p2p.send(peer, tag, payload as Uint8Array))
            .then(() => bridge.complete(id))
        : Promise.resolve()
            .then(() => p2p.recv(peer, tag, payload as number))
            .then((bytes) => {
              if (!(bytes instanceof Uint8Array)) throw new TypeError(`recv resolved with ${typeof bytes}, not a Uint8Array`);
              bridge.complete(id, undefined, bytes);
            });
    operation.catch((e: unknown) => bridge.complete(id, `the layer's ${kind === JsP2POperation.send ? 'send' : 'recv'} failed: ${describe(e)}`));
  });
  return bridge.native();
}

export function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
