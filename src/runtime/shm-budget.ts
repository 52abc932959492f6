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
import { nativeTables, NativeTree, segmentBytes, type NativeBcastParams, type SharedMemoryUse } from '../native.js';

const PAGE = 4096;

/**
 * How a node's shared memory is laid out for L local ranks: every rank's S0 bcast queue, and every
 * rank's outbox, from which it makes the one-way channels to the ranks it sends to
 * (native/src/shm/shm_channel_pool.h). Every part is a fixed size per rank, so the segment grows
 * linearly with L. The whole segment must fit the budget; this is checked before anything is
 * mapped.
 */

export interface ShmLayout {
  /** The largest channel, and the smallest an outbox must still hold for each peer. */
  channelBytes: number;
  channelMinBytes: number;
  /** Each rank's outbox. */
  channelPoolBytes: number;
  bcast: NativeBcastParams;
  /** The model's choices, for `topocoll topo` and the logs. */
  tree: string;
  segmentBytes: number;
  budgetBytes: number;
}

/** The largest channel `auto` picks: larger rings streamed through the L3 and were slower (bench/history). */
const AUTO_CHANNEL_BYTES = 1024 * 1024;
/**
 * The smallest channel an outbox makes. An exchange that pairs a local peer with a remote one
 * sends a whole segment into a channel before it receives (job-planner.ts, exchangeLimits): at
 * 64 KiB a channel still holds the native eager limit, less two headers.
 */
const MIN_CHANNEL = 64 * 1024;
/** `auto` outboxes hold this many channels of 1 MiB: 127 peers at the smallest channel. */
const AUTO_POOL_CHANNELS = 8;

/**
 * `auto` halves the largest channel until a ring for every ordered pair of the node's ranks would
 * fit this much (not below the smallest channel): the sizes the per-pair layout had within its
 * 64 MiB, which measured fastest for large messages with ranks sharing cores (at 8 ranks on 2
 * cores, 1 MiB rings took a 1–4 MiB allreduce 1.06–1.19× longer than 512 KiB ones; bench/RESULTS.md, "Big nodes").
 */
const AUTO_RINGS_BYTES = 48 * 1024 * 1024;
/** shm.channelBytes for `auto`: 1 MiB up to 7 ranks, 512 KiB at 8–10, 256 KiB at 11–14, 128 KiB at 15–20, 64 KiB from 21. */
export function autoChannelBytes(localSize: number): number {
  let bytes = AUTO_CHANNEL_BYTES;
  while (bytes > MIN_CHANNEL && localSize * (localSize - 1) * bytes > AUTO_RINGS_BYTES) bytes /= 2;
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
  const channel = config.shm.channelBytes === 'auto' ? autoChannelBytes(localSize) : config.shm.channelBytes;
  const channelMin = Math.min(MIN_CHANNEL, channel);
  const { outboxHeaderBytes, channelBlockHeaderBytes } = nativeTables();
  // The smallest outbox that holds one channel, and all but the outboxes (the native layout at
  // outboxes of 0 bytes).
  const smallestPool = outboxHeaderBytes + channelBlockHeaderBytes + channelMin;
  const rest = segmentBytes(localSize, 0, native);
  let pool = config.shm.channelPoolBytes;
  if (pool === 'auto') {
    pool = AUTO_POOL_CHANNELS * (AUTO_CHANNEL_BYTES + channelBlockHeaderBytes) + outboxHeaderBytes;
    // Less when the budget cannot hold that for every rank, but never below one channel.
    const share = Math.floor((budgetBytes - rest) / Math.max(1, localSize) / PAGE) * PAGE;
    if (localSize > 1 && share < pool) pool = Math.max(share, smallestPool);
  }
  if (pool < smallestPool) {
    throw new TopocollError(
      'ECONFIG',
      `shm.channelPoolBytes = ${pool} cannot hold one channel of ${channelMin} bytes (${smallestPool} bytes with its headers)`,
      {
        hint: 'Raise shm.channelPoolBytes.',
      },
    );
  }
  const total = localSize > 1 ? segmentBytes(localSize, pool, native) : 0;
  if (total > budgetBytes) {
    const outboxes = total - rest;
    throw new TopocollError(
      'ECONFIG',
      `the node's shared segment needs ${total} bytes for ${localSize} ranks (per rank: a bcast queue of ${queueBytes} bytes and an outbox of ${outboxes / localSize} bytes for its channels; ${rest} bytes for queues, controls and the shared area, ${outboxes} for outboxes), more than shm.budgetBytes = ${budgetBytes}`,
      {
        hint: 'Raise shm.budgetBytes, or lower shm.bcast.queueBytes or shm.channelPoolBytes.',
      },
    );
  }
  return {
    channelBytes: channel,
    channelMinBytes: channelMin,
    channelPoolBytes: pool,
    bcast: native,
    tree: formatTree(tree),
    segmentBytes: total,
    budgetBytes,
  };
}

/** What Communicator.sharedMemory() reports, in bytes (all 0 for a rank alone on its node). */
export interface SharedMemoryReport {
  /** shm.budgetBytes: the segment and the windows together may take this much. */
  budgetBytes: number;
  /** The node's segment, and its parts. */
  segmentBytes: number;
  localRanks: number;
  segment: {
    /** Its header and every rank's control block. */
    controlBytes: number;
    /** Every rank's outbox, from which it makes its channels. */
    outboxesBytes: number;
    /** Every rank's S0 bcast queue and its control rings. */
    bcastQueuesBytes: number;
    /** The node-wide area of small allreduces, allgathers and barriers. */
    nodeAreaBytes: number;
  };
  /** One rank's outbox. */
  outboxBytes: number;
  /** The channels the node's ranks have made so far, their bytes (rings and headers), and the most of any one outbox. */
  channels: number;
  channelsBytes: number;
  largestOutboxUse: number;
  /** This communicator's shared windows on the node. */
  windowsBytes: number;
}

/** The report of a node's shared memory from what the engine reads of its segment (`use`), the budget and this communicator's windows. */
export function sharedMemoryReport(use: SharedMemoryUse, budgetBytes: number, localRanks: number, windowsBytes: number): SharedMemoryReport {
  return {
    budgetBytes,
    segmentBytes: use.segmentBytes,
    localRanks,
    segment: {
      controlBytes: use.controlBytes,
      outboxesBytes: use.outboxesBytes,
      bcastQueuesBytes: use.bcastRegionsBytes,
      nodeAreaBytes: use.nodeAreaBytes,
    },
    outboxBytes: use.outboxBytes,
    channels: use.channels,
    channelsBytes: use.channelsBytes,
    largestOutboxUse: use.largestOutboxUse,
    windowsBytes,
  };
}
