import {
  autoQueueBytes,
  chooseTree,
  formatTree,
  fragmentTable,
  MIN_FRAGMENT,
  parseTree,
  type BcastShape,
  type ShmCostModel,
} from '../algorithms/shm-bcast-model.js';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import { NativeTree, segmentBytes, type NativeBcastParams } from '../native.js';

/**
 * How a node's shared memory is laid out for L local ranks: every rank's S0 bcast queue, and
 * the L·(L−1) one-way channels that carry point-to-point messages. The whole segment must fit
 * the configured budget; this is checked before anything is mapped.
 */

export interface ShmLayout {
  channelBytes: number;
  bcast: NativeBcastParams;
  /** The model's choices, for `topocoll topo` and the logs. */
  tree: string;
  segmentBytes: number;
}

const MIN_CHANNEL = 16 * 1024;
/**
 * The largest channel `auto` picks. Larger rings were slower for large messages, not faster:
 * a 1 MiB ring's lines stay in the caches of the two cores, while 4 MiB rings streamed through
 * the L3 (bench/history/RESULTS-log-to-2026-11-24.md).
 */
const AUTO_MAX_CHANNEL = 1024 * 1024;

/**
 * Channels get an equal share of what the queues leave: a power of two between 16 KiB and
 * 1 MiB (a power of two so ring offsets are a mask; the bounds keep pipelining useful and
 * memory finite).
 */
export function channelBytes(budget: number, localSize: number): number {
  if (localSize < 2) return MIN_CHANNEL;
  const share = budget / (localSize * (localSize - 1));
  let bytes = MIN_CHANNEL;
  while (bytes * 2 <= share && bytes < AUTO_MAX_CHANNEL) bytes *= 2;
  return bytes;
}

export function shmLayout(config: TopocollConfig, localSize: number, cores: number): ShmLayout {
  const { budgetBytes, bcast, model } = config.shm;
  const queueBytes = bcast.queueBytes === 'auto' ? autoQueueBytes(budgetBytes, localSize) : bcast.queueBytes;
  if (queueBytes % MIN_FRAGMENT !== 0) {
    throw new TopocollError('ECONFIG', `shm.bcast.queueBytes (${queueBytes}) must be a multiple of ${MIN_FRAGMENT}`);
  }
  const base = { queueBytes, minFragment: MIN_FRAGMENT, sets: bcast.sets };
  const costModel: ShmCostModel = model;
  const tree = bcast.tree === 'auto' ? chooseTree(costModel, localSize, cores, base) : parseTree(bcast.tree);
  const shape: BcastShape = { ...base, tree };
  const table = bcast.fragmentBytes === 'auto' ? fragmentTable(costModel, localSize, cores, shape) : [bcast.fragmentBytes];
  const native: NativeBcastParams = {
    queueBytes,
    minFragment: MIN_FRAGMENT,
    sets: bcast.sets,
    tree: NativeTree[tree.kind],
    radix: tree.radix,
    fragmentForLog2: table,
  };
  // The segment grows by one byte per channel per byte of channel capacity; everything else
  // (header, controls, queues, control rings, per-channel pages) is what the native layout
  // needs at the smallest channels, less those channels' capacity.
  const channels = localSize * (localSize - 1);
  const fixed = segmentBytes(localSize, MIN_CHANNEL, native) - channels * MIN_CHANNEL;
  const channel = config.shm.channelBytes === 'auto' ? channelBytes(budgetBytes - fixed, localSize) : config.shm.channelBytes;
  const total = localSize > 1 ? fixed + channels * channel : 0;
  if (total > budgetBytes) {
    throw new TopocollError(
      'ECONFIG',
      `the node's shared segment needs ${total} bytes for ${localSize} ranks (bcast queue ${queueBytes} bytes per rank, ${localSize * (localSize - 1)} channels of ${channel} bytes), more than shm.budgetBytes = ${budgetBytes}`,
      {
        hint: 'Raise shm.budgetBytes or lower shm.bcast.queueBytes or shm.channelBytes.',
      },
    );
  }
  return { channelBytes: channel, bcast: native, tree: formatTree(tree), segmentBytes: total };
}
