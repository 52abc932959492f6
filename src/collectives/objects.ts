import { deserialize, serialize } from 'node:v8';
import { TopocollError } from '../errors.js';

/**
 * The object forms of bcast, gather, allgather and scatter (mpi4py's lower-case methods,
 * torch.distributed's *_object_list): values serialised with Node's structured clone
 * (v8.serialize), moved as bytes by the communicator's own collectives, deserialised on arrival.
 *
 * Each form is written once, as a generator that yields the byte collectives it needs in order;
 * `runSync` drives it with the blocking forms, `runAsync` with the Promise forms, so both send
 * the same messages in the same order. Every form first agrees on the byte lengths (a bcast or
 * an allgather of float64 lengths), then moves the bytes (bcast, gatherv, allgatherv, scatterv).
 *
 * A value that cannot be cloned gives EINVAL on the rank that holds it, which then sends a length
 * of NOT_CLONED instead of bytes; its peers learn it from the lengths and throw EINVAL naming that
 * rank. No rank sends a byte of any value then, and none waits for bytes that will not come.
 */

/** The byte collectives of one communicator that the object forms are made of. */
export interface ByteCollectives {
  readonly rank: number;
  readonly size: number;
  bcastSync(buf: Float64Array | Uint8Array, root: number): void;
  bcast(buf: Float64Array | Uint8Array, root: number): Promise<void>;
  allgatherSync(send: Float64Array, recv: Float64Array): void;
  allgather(send: Float64Array, recv: Float64Array): Promise<void>;
  allgathervSync(send: Uint8Array, recv: Uint8Array, counts: ArrayLike<number>): void;
  allgatherv(send: Uint8Array, recv: Uint8Array, counts: ArrayLike<number>): Promise<void>;
  gathervSync(send: Uint8Array, recv: Uint8Array | null, counts: ArrayLike<number>, root: number): void;
  gatherv(send: Uint8Array, recv: Uint8Array | null, counts: ArrayLike<number>, root: number): Promise<void>;
  scattervSync(send: Uint8Array | null, recv: Uint8Array, counts: ArrayLike<number>, root: number): void;
  scatterv(send: Uint8Array | null, recv: Uint8Array, counts: ArrayLike<number>, root: number): Promise<void>;
}

/** One byte collective of an object form, as data. */
export type ByteStep =
  | { kind: 'bcast'; buf: Float64Array | Uint8Array; root: number }
  | { kind: 'allgather'; send: Float64Array; recv: Float64Array }
  | { kind: 'allgatherv'; send: Uint8Array; recv: Uint8Array; counts: number[] }
  | { kind: 'gatherv'; send: Uint8Array; recv: Uint8Array | null; counts: number[]; root: number }
  | { kind: 'scatterv'; send: Uint8Array | null; recv: Uint8Array; counts: number[]; root: number };

type ObjectForm<T> = Generator<ByteStep, T, void>;

/** The length a rank sends for a value it could not serialise. */
const NOT_CLONED = -1;
/** scatterObject's root: `values` is not an array of one value per rank. */
const NOT_ONE_PER_RANK = -2;

/** Runs an object form with the blocking collectives. */
export function runSync<T>(comm: ByteCollectives, form: ObjectForm<T>): T {
  for (let step = form.next(); ; step = form.next()) {
    if (step.done) return step.value;
    const s = step.value;
    if (s.kind === 'bcast') comm.bcastSync(s.buf, s.root);
    else if (s.kind === 'allgather') comm.allgatherSync(s.send, s.recv);
    else if (s.kind === 'allgatherv') comm.allgathervSync(s.send, s.recv, s.counts);
    else if (s.kind === 'gatherv') comm.gathervSync(s.send, s.recv, s.counts, s.root);
    else comm.scattervSync(s.send, s.recv, s.counts, s.root);
  }
}

/** Runs an object form with the Promise collectives, one after the other. */
export async function runAsync<T>(comm: ByteCollectives, form: ObjectForm<T>): Promise<T> {
  for (let step = form.next(); ; step = form.next()) {
    if (step.done) return step.value;
    const s = step.value;
    if (s.kind === 'bcast') await comm.bcast(s.buf, s.root);
    else if (s.kind === 'allgather') await comm.allgather(s.send, s.recv);
    else if (s.kind === 'allgatherv') await comm.allgatherv(s.send, s.recv, s.counts);
    else if (s.kind === 'gatherv') await comm.gatherv(s.send, s.recv, s.counts, s.root);
    else await comm.scatterv(s.send, s.recv, s.counts, s.root);
  }
}

interface Serialised {
  bytes: Uint8Array;
  /** Why the value could not be cloned (then `bytes` is empty). */
  error?: Error;
}

function serialise(value: unknown): Serialised {
  try {
    const b = serialize(value);
    return { bytes: new Uint8Array(b.buffer, b.byteOffset, b.byteLength) };
  } catch (e) {
    return { bytes: new Uint8Array(0), error: e as Error };
  }
}

/** Throws on every rank when a length marks a value that could not be sent (the holder's own error on it). */
function checkLengths(what: string, comm: ByteCollectives, lengths: ArrayLike<number>, ranks: (i: number) => number, mine?: Serialised): void {
  for (let i = 0; i < lengths.length; i++) {
    const length = lengths[i]!;
    if (length >= 0) continue;
    const holder = ranks(i);
    if (length === NOT_ONE_PER_RANK) {
      throw new TopocollError('EINVAL', `${what}: the root (rank ${holder}) needs an array of ${comm.size} values, one per rank`, { rank: comm.rank });
    }
    const own = holder === comm.rank && mine?.error !== undefined ? `: ${mine.error.message}` : '';
    throw new TopocollError('EINVAL', `${what}: rank ${holder}'s value cannot be cloned (v8.serialize)${own}`, {
      rank: comm.rank,
      hint: 'Values travel by structured clone: no functions, symbols, class prototypes or native handles.',
    });
  }
}

const valuesAt = (bytes: Uint8Array, lengths: ArrayLike<number>): unknown[] => {
  const out: unknown[] = [];
  for (let i = 0, at = 0; i < lengths.length; at += lengths[i]!, i++) out.push(deserialize(bytes.subarray(at, at + lengths[i]!)));
  return out;
};

/** Every rank gets the root's value. */
export function* bcastObject<T>(comm: ByteCollectives, value: T, root: number): ObjectForm<T> {
  const mine = comm.rank === root ? serialise(value) : undefined;
  const length = new Float64Array([mine === undefined ? 0 : mine.error !== undefined ? NOT_CLONED : mine.bytes.byteLength]);
  yield { kind: 'bcast', buf: length, root };
  checkLengths('bcastObject', comm, length, () => root, mine);
  if (mine !== undefined) {
    yield { kind: 'bcast', buf: mine.bytes, root };
    return value;
  }
  const bytes = new Uint8Array(length[0]!);
  yield { kind: 'bcast', buf: bytes, root };
  return deserialize(bytes) as T;
}

/** The length of every rank's serialised value, agreed by all (an allgather of lengths). */
function* lengthsOfAll(what: string, comm: ByteCollectives, mine: Serialised): Generator<ByteStep, number[], void> {
  const lengths = new Float64Array(comm.size);
  yield { kind: 'allgather', send: new Float64Array([mine.error !== undefined ? NOT_CLONED : mine.bytes.byteLength]), recv: lengths };
  checkLengths(what, comm, lengths, (i) => i, mine);
  return Array.from(lengths);
}

/** Every rank's value, in rank order, at every rank. */
export function* allgatherObject<T>(comm: ByteCollectives, value: T): ObjectForm<T[]> {
  const mine = serialise(value);
  const lengths = yield* lengthsOfAll('allgatherObject', comm, mine);
  const all = new Uint8Array(lengths.reduce((a, b) => a + b, 0));
  yield { kind: 'allgatherv', send: mine.bytes, recv: all, counts: lengths };
  return valuesAt(all, lengths) as T[];
}

/** Every rank's value, in rank order, at the root; null elsewhere. */
export function* gatherObject<T>(comm: ByteCollectives, value: T, root: number): ObjectForm<T[] | null> {
  const mine = serialise(value);
  // Every rank learns every length, so a value that cannot be cloned stops every rank alike.
  const lengths = yield* lengthsOfAll('gatherObject', comm, mine);
  const all = comm.rank === root ? new Uint8Array(lengths.reduce((a, b) => a + b, 0)) : null;
  yield { kind: 'gatherv', send: mine.bytes, recv: all, counts: lengths, root };
  return all === null ? null : (valuesAt(all, lengths) as T[]);
}

/** Rank i gets `values[i]` of the root (`values` is read on the root only: null elsewhere). */
export function* scatterObject<T>(comm: ByteCollectives, values: readonly T[] | null, root: number): ObjectForm<T> {
  const lengths = new Float64Array(comm.size);
  let pieces: Serialised[] = [];
  if (comm.rank === root) {
    if (!Array.isArray(values) || values.length !== comm.size) lengths.fill(NOT_ONE_PER_RANK);
    else {
      pieces = values.map(serialise);
      pieces.forEach((p, i) => (lengths[i] = p.error !== undefined ? NOT_CLONED : p.bytes.byteLength));
    }
  }
  yield { kind: 'bcast', buf: lengths, root };
  const failed = pieces.find((p) => p.error !== undefined);
  checkLengths('scatterObject', comm, lengths, () => root, failed);
  const counts = Array.from(lengths);
  let send: Uint8Array | null = null;
  if (comm.rank === root) {
    send = new Uint8Array(counts.reduce((a, b) => a + b, 0));
    let at = 0;
    for (const p of pieces) {
      send.set(p.bytes, at);
      at += p.bytes.byteLength;
    }
  }
  const recv = new Uint8Array(counts[comm.rank]!);
  yield { kind: 'scatterv', send, recv, counts, root };
  return deserialize(recv) as T;
}
