import { TopocollError } from '../errors.js';
import { layerMessages, type NativeP2PLayer } from '../native.js';
import { pollUntilDone } from '../util/poll.js';
import type { PointToPoint } from './point-to-point.js';

/**
 * A native layer's messages from JavaScript (native/src/binding/layer_messages.h), as a
 * PointToPoint: what createCommunicator's setup runs over when the host gives only `native`. stop()
 * ends it: receives still pending are abandoned and every pending operation rejects, so no polling
 * outlives a failed setup.
 */
export class NativeLayerMessages implements PointToPoint {
  readonly rank: number;
  readonly size: number;
  readonly tagBase: number;
  private readonly receiving = new Set<number>();
  private stoppedWith?: Error;

  constructor(private readonly layer: NativeP2PLayer) {
    this.rank = layer.rank;
    this.size = layer.size;
    this.tagBase = layer.tagBase;
  }

  async send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    const id = layerMessages.isend(this.layer, peer, tag, data);
    await pollUntilDone(
      () => layerMessages.test(this.layer, id),
      () => this.stoppedWith,
    );
  }

  async recv(peer: number, tag: number, maxBytes: number): Promise<Uint8Array> {
    const id = layerMessages.irecv(this.layer, peer, tag, maxBytes);
    this.receiving.add(id);
    try {
      const got = await pollUntilDone(
        () => layerMessages.test(this.layer, id),
        () => this.stoppedWith,
      );
      return got as Uint8Array;
    } finally {
      this.receiving.delete(id);
    }
  }

  /** Abandons the receives still pending; every operation still pending rejects with ECLOSED. */
  stop(): void {
    this.stoppedWith ??= new TopocollError('ECLOSED', 'the setup over the native layer ended', { rank: this.rank });
    for (const id of this.receiving) layerMessages.abandon(this.layer, id);
    this.receiving.clear();
  }
}
