import { TopocollError } from '../errors.js';

/**
 * The time model of the S0 shared-memory bcast and the parameter choice derived from it.
 *
 * A bcast of m bytes among p local ranks on `cores` cores, with fragments of f bytes, a queue of
 * S = Q/f slots split into q sets and a notification tree:
 * - notification: each rank writes its children's control blocks one after the other, α µs
 *   each; the last rank is reached after `notifyUs(tree)` (computed exactly on the tree);
 * - copy-in by the root: f/c µs per fragment (c = copy rate in bytes/µs) plus o µs of overhead;
 *   copy-out by each reader the same, but p − 1 readers share `cores` cores;
 * - pipelining: with n = ⌈m/f⌉ fragments the fragments flow at the rate of the slower stage;
 * - the three regimes of S0: m ≤ f (one fragment), f < m ≤ S·f (pipelined, no reuse) and
 *   m > S·f (slots reused: with one set the root waits for the readers to drain the whole queue
 *   each round; with q ≥ 2 it refills one set while they drain another, paying a notification
 *   round per set refill).
 * Messages of up to 104 bytes travel inside the control blocks: notification only. Every call
 * also pays a fixed `callUs` (entering the native code, checks, publishing the call), and
 * messages larger than `largeBytes` copy at the memory-bound `largeCopyBytesPerUs` (their
 * fragments no longer stay in the caches).
 */

export interface ShmCostModel {
  /** Copy rate of one core, bytes per µs. */
  copyBytesPerUs: number;
  /** Copy rate for messages beyond `largeBytes` (memory-bound), bytes per µs. */
  largeCopyBytesPerUs: number;
  /** Messages above this size copy at `largeCopyBytesPerUs`. */
  largeBytes: number;
  /** Writing a child's control block and the child seeing it, µs. */
  notifyUs: number;
  /** Fixed cost per fragment per rank (loop, set accounting), µs. */
  fragmentUs: number;
  /** Fixed cost per call, µs. */
  callUs: number;
}

export type TreeKind = 'flat' | 'chain' | 'kary' | 'knomial';

export interface TreeSpec {
  kind: TreeKind;
  radix: number;
}

export interface BcastShape {
  /** Bytes of each rank's queue (S·f). */
  queueBytes: number;
  /** Smallest fragment: the unit of the queue's slots. */
  minFragment: number;
  /** Buffer sets q. */
  sets: number;
  tree: TreeSpec;
}

export const INLINE_BYTES = 104;
export const MIN_FRAGMENT = 4096;

/** Each rank's queue under `queueBytes: auto`: a quarter of the budget shared by the ranks, a power of two in 64 KiB … 1 MiB. */
export function autoQueueBytes(budget: number, localSize: number): number {
  const share = budget / 4 / Math.max(1, localSize);
  let bytes = 64 * 1024;
  while (bytes * 2 <= share && bytes < 1024 * 1024) bytes *= 2;
  return bytes;
}

/** Parses `flat`, `chain`, `kary:K`, `knomial:K` (`binomial` = `knomial:2`). */
export function parseTree(text: string): TreeSpec {
  if (text === 'flat' || text === 'chain') return { kind: text, radix: 2 };
  if (text === 'binomial') return { kind: 'knomial', radix: 2 };
  const m = /^(kary|knomial):([2-9]|[1-9][0-9]+)$/.exec(text);
  if (m) return { kind: m[1] as TreeKind, radix: Number(m[2]) };
  throw new TopocollError('ECONFIG', `unknown notification tree "${text}"`, { hint: 'Use flat, chain, binomial, kary:K or knomial:K.' });
}

export function formatTree(t: TreeSpec): string {
  return t.kind === 'flat' || t.kind === 'chain' ? t.kind : `${t.kind}:${t.radix}`;
}

/** Children of relative position v in a tree over n ranks rooted at 0, in notification order. */
export function treeChildren(t: TreeSpec, n: number, v: number): number[] {
  const k = Math.max(2, t.radix);
  const out: number[] = [];
  switch (t.kind) {
    case 'flat':
      if (v === 0) for (let c = 1; c < n; c++) out.push(c);
      break;
    case 'chain':
      if (v + 1 < n) out.push(v + 1);
      break;
    case 'kary':
      for (let c = k * v + 1; c <= k * v + k && c < n; c++) out.push(c);
      break;
    case 'knomial': {
      let low = 1;
      if (v === 0) while (low < n) low *= k;
      else while (Math.floor(v / low) % k === 0) low *= k;
      for (let power = Math.floor(low / k); power >= 1; power = Math.floor(power / k)) {
        for (let j = 1; j < k; j++) if (v + j * power < n) out.push(v + j * power);
      }
      break;
    }
  }
  return out;
}

/** Time until the last of n ranks has been notified, each parent notifying its children in turn. */
export function notifyTime(t: TreeSpec, n: number, notifyUs: number): number {
  // The model asks for the same few trees for every message size and fragment it weighs
  // (chooseTree, fragmentTable): a walk of the whole tree each time was most of a rank's
  // layout work at startup.
  const key = `${t.kind}:${t.radix}:${n}:${notifyUs}`;
  const known = notifyTimes.get(key);
  if (known !== undefined) return known;
  let latest = 0;
  const visit = (v: number, at: number): void => {
    latest = Math.max(latest, at);
    treeChildren(t, n, v).forEach((c, j) => visit(c, at + (j + 1) * notifyUs));
  };
  visit(0, 0);
  notifyTimes.set(key, latest);
  return latest;
}

/** notifyTime's results by tree, rank count and notify cost (a handful per process). */
const notifyTimes = new Map<string, number>();

/** Predicted µs of one bcast of `bytes` among `ranks` ranks on `cores` cores with fragments of `fragment`. */
export function predictBcastUs(model: ShmCostModel, bytes: number, ranks: number, cores: number, shape: BcastShape, fragment: number): number {
  if (ranks < 2) return 0;
  const notify = notifyTime(shape.tree, ranks, model.notifyUs);
  if (bytes <= INLINE_BYTES) return model.callUs + notify;
  const rate = bytes > model.largeBytes ? model.largeCopyBytesPerUs : model.copyBytesPerUs;
  const copy = (b: number) => b / rate;
  const share = Math.max(1, (ranks - 1) / Math.max(1, cores));
  const n = Math.max(1, Math.ceil(bytes / fragment));
  const slots = Math.max(1, Math.floor(shape.queueBytes / fragment));
  const copyIn = copy(fragment) + model.fragmentUs;
  const copyOut = copy(fragment) * share + model.fragmentUs;
  const stage = Math.max(copyIn, copyOut);
  if (n <= slots) return model.callUs + notify + copyIn + n * stage;
  if (shape.sets <= 1) {
    const rounds = Math.ceil(n / slots);
    return model.callUs + rounds * (slots * copyIn + notify + slots * copyOut);
  }
  const perSet = Math.max(1, Math.ceil(slots / shape.sets));
  const refills = Math.max(0, Math.ceil(n / perSet) - shape.sets);
  return model.callUs + notify + copyIn + n * stage + refills * notify;
}

/** Fragment sizes worth trying: powers of two from the queue's unit up to one set. */
function candidateFragments(shape: BcastShape): number[] {
  const out: number[] = [];
  const largest = Math.max(shape.minFragment, Math.floor(shape.queueBytes / Math.max(1, shape.sets)));
  for (let f = shape.minFragment; f <= largest; f *= 2) out.push(f);
  return out;
}

/** The best fragment for each message size 2^i, i = 0 … 26 (64 MiB), under the model. */
export function fragmentTable(model: ShmCostModel, ranks: number, cores: number, shape: BcastShape): number[] {
  const table: number[] = [];
  for (let i = 0; i <= 26; i++) {
    const m = 2 ** i;
    let best = shape.minFragment;
    let bestT = Infinity;
    for (const f of candidateFragments(shape)) {
      const t = predictBcastUs(model, m, ranks, cores, shape, f);
      if (t < bestT - 1e-9) {
        bestT = t;
        best = f;
      }
    }
    table.push(best);
  }
  return table;
}

export const TREE_CANDIDATES: readonly TreeSpec[] = [
  { kind: 'flat', radix: 2 },
  { kind: 'chain', radix: 2 },
  { kind: 'kary', radix: 2 },
  { kind: 'knomial', radix: 2 },
  { kind: 'knomial', radix: 4 },
];

/**
 * The tree for `ranks` ranks: least predicted time summed over a small, a medium and a large
 * message, each relative to the best tree for that message, so no size class dominates.
 */
export function chooseTree(model: ShmCostModel, ranks: number, cores: number, base: Omit<BcastShape, 'tree'>): TreeSpec {
  const sizes = [8, 64 * 1024, 4 * 1024 * 1024];
  const tables = new Map(TREE_CANDIDATES.map((tree) => [tree, fragmentTable(model, ranks, cores, { ...base, tree })]));
  const time = (tree: TreeSpec, m: number): number => {
    const f = tables.get(tree)![Math.min(26, Math.ceil(Math.log2(Math.max(1, m))))]!;
    return predictBcastUs(model, m, ranks, cores, { ...base, tree }, f);
  };
  const best = sizes.map((m) => Math.min(...TREE_CANDIDATES.map((t) => time(t, m))));
  let choice = TREE_CANDIDATES[0]!;
  let score = Infinity;
  for (const t of TREE_CANDIDATES) {
    const s = sizes.reduce((acc, m, i) => acc + time(t, m) / Math.max(best[i]!, 1e-9), 0);
    if (s < score - 1e-9) {
      score = s;
      choice = t;
    }
  }
  return choice;
}
