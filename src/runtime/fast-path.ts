import {
  CALL_COUNTER_WORDS,
  CallCounter,
  Collective,
  Dtype,
  MSG_HEADER_BYTES,
  MSG_MAGIC,
  MsgHeaderShift,
  MsgHeaderWord,
  REDUCE_OP_INFO,
  ReduceOp,
  SHARED_AREA_LINE_BYTES,
  SHARED_AREA_PREFETCH_BYTES,
} from '../abi.generated.js';
import type { FastPathEngine, FastPathLayout, NativeFastPath } from '../native.js';
import type { TypedArray } from '../util/typed-array.js';
import { DATATYPES, type ReduceOpName } from './datatypes.js';

/**
 * The one-node shared area's every-rank and one-way protocols (native/src/shm/shm_allreduce.h), run
 * in JavaScript: small bcasts, reduces, allreduces, allgathers, barriers, gathers, scatters,
 * alltoalls, reduce-scatters and scans of a one-node job make no call into the addon unless they
 * have to wait long.
 *
 * A call here is the same call the executor would make (Engine::Run, ShmAllreduce::Run,
 * Allgather with the every-rank protocol, Bcast, Reduce, Gather … Scan), word for word, so a call made by
 * either path meets calls made by the other — on other ranks, and on this rank before and after:
 *   1. the node's abort word is read first (set: the executor takes the call and throws); then,
 *      unless AreaCalls::all_entered says so already, that every rank has entered the call whose
 *      slot this call reuses (ShmAllreduce's "Reuse": every rank's mark of the call kDepth/2
 *      back, a bounded spin; past it the executor takes the call and waits);
 *   2. seq + 1, the header, CallHash, the previous call folded into the plan hash — in the
 *      engine's CallCounters, which both paths advance;
 *   3. the call is published in this rank's RankControl (seqlock) for peers' liveness checks —
 *      lazily: only before this rank waits in the addon, and at close. A peer's checks read a
 *      call that is not published yet as this rank still being in an earlier one, which is
 *      harmless while this rank does not wait (a call with another seq is never a mismatch);
 *      at close it must be there (a departed rank behind the call is a lost peer);
 *   4. data, then the header, go to this rank's slot of the call (a bcast's and a scatter's
 *      readers, a gather's root and, but in place after local rank 0, a reduce's root: the
 *      header only — nobody reads their data),
 *      then the mark (call + 1), then `sleeping` of each peer is read
 *      (Doorbell::Ring) and peers that announced a sleep are rung through the addon;
 *   5. the slots this rank reads — every other rank's in local order; a bcast's or scatter's
 *      reader: the root's; a reduce or gather: the root every rank's, the others none; a scan:
 *      the ranks' before it — a
 *      bounded spin on its mark, then — past the spin — Engine::AwaitAreaDeposits waits with
 *      every check of a native wait (aborts, dead and departed peers, the watchdog, close) and
 *      checks the headers; a header that differs goes to the same function, which raises the
 *      executor's EMISMATCH (and abort);
 *   6. combining in local order with the native kernels' arithmetic (datatypes.cc), or copying
 *      blocks out (allgather, bcast, gather, scatter, alltoall) bit for bit; a rank that saw
 *      every rank's mark of the call records it in all_entered.
 * The fast path's calls all keep their data in the slot (kInlineBytes), never in a column.
 *
 * Only x86-64, where stores are not reordered with other stores nor loads with other loads: the
 * code uses plain typed-array accesses (which V8 keeps in program order) wherever x86 needs no
 * fence, because V8 does not inline Atomics calls — but an Atomics.store
 * opens the published call's seqlock, so no compiler may drop it; Atomics.load where a loop
 * re-reads a word (a plain load could be hoisted out of it); the mark is a plain store when
 * sleepers fence for the wakers (membarrier, `asymmetric`), else an exchange, the full fence
 * a waker then needs before it reads `sleeping`.
 */

// The words and codes below are abi/abi.yaml's (src/abi.generated.ts). The header's and the
// counters' words are const enums, which the compiler writes as numbers where they are used:
// literal indices on the latency path (a module constant is a load per use there).
/** MsgHeader as 32-bit words: magic, seq, the kinds word (collective, dtype, op and phase bytes), root, count (low word; the high one stays 0), plan hash, sender (the last word). */
// The loops over the header's words run to MsgHeaderWord.sender, the last (a literal there).
const HEADER_WORDS = MSG_HEADER_BYTES / 4;
/** Collective codes. */
const BARRIER = Collective.barrier;
const BCAST = Collective.bcast;
const REDUCE = Collective.reduce;
const ALLREDUCE = Collective.allreduce;
const ALLGATHER = Collective.allgather;
const GATHER = Collective.gather;
const SCATTER = Collective.scatter;
const REDUCE_SCATTER = Collective.reduceScatter;
const ALLTOALL = Collective.alltoall;
const SCAN = Collective.scan;
const EXSCAN = Collective.exscan;
/** Dtype codes: those whose elements are BigInts in JavaScript, and those whose products are not Math.imul's. */
const INT64 = Dtype.int64;
const UINT64 = Dtype.uint64;
const UINT8_CLAMPED = Dtype.uint8clamped;
const FLOAT32 = Dtype.float32;
const FLOAT64 = Dtype.float64;
const DTYPES = DATATYPES.length;
/** Built-in operators. */
const OPS = REDUCE_OP_INFO.length;
/** 32-bit words in the cache line `await`'s early reads step by (ShmAllreduce::kLineBytes). */
const LINE_WORDS = SHARED_AREA_LINE_BYTES / 4;
/** Largest one-way deposit whose later lines `await` reads early (ShmAllreduce::kPrefetchBytes; see there). */
const EARLY_READ_MAX_BYTES = SHARED_AREA_PREFETCH_BYTES;

/** out[i] = out[i] op src[at + i] for i < n (`at` 0 when left out). */
type Kernel = (out: TypedArray, src: TypedArray, n: number, at?: number) => void;

// The native kernels' arithmetic (native/src/base/datatypes.cc), element by element, as the body of
// `for (let i = 0; i < n; i++) { const a = out[i], b = src[o + i]; out[i] = EXPRESSION; }`.
// Assigning to a typed array wraps integers and saturates Uint8Clamped as the kernels do;
// float32 sums and products computed in double and rounded once are the float results
// (53 ≥ 2·24 + 2 bits); integer products use Math.imul (exact low 32 bits) except for
// Uint8Clamped, whose exact product the assignment saturates, and the 64-bit types (BigInts).
// Min and max are the kernels' comparisons, not Math.min/max, so NaN and ±0 pick the same
// operand.
const EXPRESSION_OF: Readonly<Record<ReduceOpName, string>> = {
  sum: 'a + b',
  prod: 'a * b',
  min: 'b < a ? b : a',
  max: 'a < b ? b : a',
  band: 'a & b',
  bor: 'a | b',
  bxor: 'a ^ b',
  land: 'a !== ZERO && b !== ZERO ? ONE : ZERO',
  lor: 'a !== ZERO || b !== ZERO ? ONE : ZERO',
};
/** By operator code. */
const EXPRESSIONS = REDUCE_OP_INFO.map(({ name }) => EXPRESSION_OF[name]);

/** Kernels made so far, by dtype · OPS + op. */
const kernels: (Kernel | undefined)[] = [];

/**
 * The kernel of a built-in operator (ReduceOp code) on a datatype (Dtype code): out = out op src.
 * Each (datatype, operator) pair gets a function of its own, compiled from source: V8 keeps type
 * feedback per function, and one loop shared by several array types turns megamorphic — every
 * element access then takes the generic path.
 */
export function fastPathKernel(dtype: number, op: number): Kernel {
  const key = dtype * OPS + op;
  const made = kernels[key];
  if (made !== undefined) return made;
  const big = dtype === INT64 || dtype === UINT64;
  let expression = EXPRESSIONS[op]!.replaceAll('ZERO', big ? '0n' : '0').replaceAll('ONE', big ? '1n' : '1');
  if (op === ReduceOp.prod && !big && dtype !== UINT8_CLAMPED && dtype !== FLOAT32 && dtype !== FLOAT64) expression = 'Math.imul(a, b)';
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- fixed source text, see above
  const kernel = new Function(
    'out',
    'src',
    'n',
    'at',
    `const o = at | 0; for (let i = 0; i < n; i++) { const a = out[i], b = src[o + i]; out[i] = ${expression}; }`,
  ) as Kernel;
  kernels[key] = kernel;
  return kernel;
}

/** murmur3's 32-bit finaliser: Engine::CallHash's mix (engine_executor.cc), as an int32. */
function mix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return x ^ (x >>> 16);
}

/** %TypedArray%.prototype.set: a memmove of the bits whatever the type (a subclass cannot replace it). */
const typedArraySet = (Object.getPrototypeOf(Uint8Array.prototype) as { set: (this: TypedArray, source: TypedArray, offset?: number) => void }).set;

/** Copies n elements of `from` from `at` on into `to` from `place` on. */
type Copy = (from: TypedArray, at: number, to: TypedArray, place: number, n: number) => void;

/** Below this many elements a loop copies faster than a call of TypedArray.prototype.set. */
const LOOP_COPY_ELEMENTS = 32;

const copySet: Copy = (from, at, to, place, n) => typedArraySet.call(to, at === 0 && from.length === n ? from : from.subarray(at, at + n), place);

/** Copy functions by Dtype code, made on first use. */
const copies: (Copy | undefined)[] = [];

/**
 * The copy of a datatype: short copies element by element in a function of the type's own
 * (one loop for every array type would turn megamorphic, as the kernels would); float32 always
 * with TypedArray.prototype.set, because a float32 element read as a number quiets a
 * signalling NaN, and a copy must keep the bits.
 */
function copyOf(dtype: number): Copy {
  const made = copies[dtype];
  if (made !== undefined) return made;
  let copy = copySet;
  if (dtype !== FLOAT32) {
    const source = `return (from, at, to, place, n) => {
      if (n >= ${LOOP_COPY_ELEMENTS}) return copySet(from, at, to, place, n);
      for (let i = 0; i < n; i++) to[place + i] = from[at + i];
    };`;
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- fixed source text, see fastPathKernel
    copy = (new Function('copySet', source) as (set: Copy) => Copy)(copySet);
  }
  copies[dtype] = copy;
  return copy;
}

export class FastPath {
  private readonly words: Uint32Array;
  private readonly counters: Uint32Array;
  private readonly layout: FastPathLayout;
  private readonly me: number;
  private readonly locals: number;
  private readonly asymmetric: boolean;
  /** Word indices, computed once: the abort word, the slots' first word, words per slot, the header within a slot. */
  private readonly abortWord: number;
  private readonly slotsWord: number;
  private readonly slotWords: number;
  private readonly headerWord: number;
  /** Slots in each rank's ring (ShmAllreduce::kDepth, a power of two). */
  private readonly depth: number;
  /** Word indices of each local rank's doorbell: `idle` and `sleeping`. */
  private readonly idleWord: Int32Array;
  private readonly sleepingWord: Int32Array;
  /** This call's header words (MsgHeader, HEADER_WORDS × uint32). */
  private readonly header = new Uint32Array(HEADER_WORDS);
  /** Where `await`'s early reads of a deposit's later lines go, so that no compiler drops them. */
  touched = 0;
  /** Calls this path has made (tests check that it runs). */
  taken = 0;
  /** Whether the header is a call not published yet (step 3). */
  private unpublished = false;
  /** CallHash up to the call number, and the plan hash, kinds word, root and count it is of. */
  private hashPrefix = 0;
  private hashedPlan = -1;
  private hashedKinds = -1;
  private hashedRoot = -1;
  private hashedCount = -1;
  /**
   * Views of the slots' data, by (slot · DTYPES + dtype), slot = place in the ring · L + local
   * index; each as long as the last call that used it (a new length makes a new view).
   */
  private readonly views: (TypedArray | undefined)[];

  /**
   * `rank`: this rank (global = local index: one node); `locals`: the ranks of the node;
   * `spin`: how many times a wait reads a mark before it asks the addon to wait.
   */
  constructor(
    native: NativeFastPath,
    private readonly engine: FastPathEngine,
    rank: number,
    private readonly spin: number,
  ) {
    this.words = new Uint32Array(native.segment);
    this.counters = new Uint32Array(native.counters, 0, CALL_COUNTER_WORDS);
    this.layout = native.layout;
    this.me = native.localIndex;
    this.asymmetric = native.asymmetric;
    this.depth = native.layout.slotDepth;
    this.locals = (native.segment.byteLength - native.layout.slots) / (this.depth * native.layout.slotStride);
    this.views = new Array<TypedArray | undefined>(this.depth * this.locals * DTYPES).fill(undefined);
    const l = native.layout;
    this.abortWord = l.abortCode >>> 2;
    this.slotsWord = l.slots >>> 2;
    this.slotWords = l.slotStride >>> 2;
    this.headerWord = l.slotHeader >>> 2;
    this.idleWord = Int32Array.from({ length: this.locals }, (_, r) => (l.controls + r * l.controlStride + l.idle) >>> 2);
    this.sleepingWord = Int32Array.from({ length: this.locals }, (_, r) => (l.controls + r * l.controlStride + l.sleeping) >>> 2);
    // The words every call's header has the same: magic, count's high word (the fast path's
    // counts are small), sender.
    this.header[MsgHeaderWord.magic] = MSG_MAGIC;
    this.header[MsgHeaderWord.sender] = rank;
  }

  /**
   * Allreduce of `input` into `recv` (n elements, built-in operator). False when the node was
   * aborted: the caller runs the call through the executor, which reports it.
   */
  allreduce(input: TypedArray, recv: TypedArray, n: number, dtype: number, op: number, planHash: number): boolean {
    const call = this.begin(ALLREDUCE, dtype, op, n, 0, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    copy(input, 0, this.view(call, this.me, dtype, n), 0, n);
    this.mark(call);
    const kernel = fastPathKernel(dtype, op);
    let checked = false;
    for (let r = 0; r < this.locals; r++) {
      if (r !== this.me && !checked) checked = this.await(call, r, this.locals);
      const theirs = this.view(call, r, dtype, n);
      if (r === 0) copy(theirs, 0, recv, 0, n);
      else kernel(recv, theirs, n);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Bcast of `buf` (n elements) from `root`, one way (ShmAllreduce::Bcast). False as for
   * allreduce.
   */
  bcast(buf: TypedArray, n: number, dtype: number, root: number, planHash: number): boolean {
    const call = this.begin(BCAST, dtype, 0, n, root, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    if (root === this.me) {
      copy(buf, 0, this.view(call, root, dtype, n), 0, n);
      this.mark(call);
      return true;
    }
    this.mark(call);
    this.await(call, root, root + 1, this.depositWords(n * DATATYPES[dtype]!.bytes));
    // It saw the root's mark; at two ranks that is every mark.
    if (this.locals === 2) this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    copy(this.view(call, root, dtype, n), 0, buf, 0, n);
    return true;
  }

  /**
   * Reduce of every rank's `input` (n elements, built-in operator) into `recv` at `root` (null
   * elsewhere), one way (ShmAllreduce::Reduce). False as for allreduce.
   */
  reduce(input: TypedArray, recv: TypedArray | null, n: number, dtype: number, op: number, root: number, planHash: number): boolean {
    const call = this.begin(REDUCE, dtype, op, n, root, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    // The root combines its input where it is, without depositing it: no other rank reads a
    // reduce root's data, and input and recv are one array (IN_PLACE) or share no bytes
    // (Communicator.checkApart). In place, a root after local rank 0 would have overwritten recv
    // with rank 0's data before its own turn, so it deposits its input as the senders do.
    const direct = recv !== null && (input !== recv || this.me === 0);
    if (!direct) copy(input, 0, this.view(call, this.me, dtype, n), 0, n);
    this.mark(call);
    if (recv === null) return true;
    const kernel = fastPathKernel(dtype, op);
    const early = this.depositWords(n * DATATYPES[dtype]!.bytes);
    let checked = false;
    for (let r = 0; r < this.locals; r++) {
      if (r !== this.me && !checked) checked = this.await(call, r, this.locals, early);
      const theirs = r === this.me && direct ? input : this.view(call, r, dtype, n);
      if (r === 0) copy(theirs, 0, recv, 0, n);
      else kernel(recv, theirs, n);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /** A barrier (the area's allreduce of nothing). False as for allreduce. */
  barrier(planHash: number): boolean {
    const call = this.begin(BARRIER, 1, 0, 0, 0, planHash);
    if (call < 0) return false;
    this.mark(call);
    let checked = false;
    for (let r = 0; r < this.locals && !checked; r++) {
      if (r !== this.me) checked = this.await(call, r, this.locals);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Allgather of `count` elements per rank (one column round: count·elem ≤ the slot) into
   * `recv`; `send` is this rank's block, or recv itself (IN_PLACE). False as for allreduce.
   */
  allgather(send: TypedArray, recv: TypedArray, count: number, dtype: number, planHash: number): boolean {
    const call = this.begin(ALLGATHER, dtype, 0, count * this.locals, 0, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    const own = this.view(call, this.me, dtype, count);
    if (send !== recv) {
      copy(send, 0, recv, this.me * count, count);
      copy(send, 0, own, 0, count);
    } else {
      copy(recv, this.me * count, own, 0, count);
    }
    this.mark(call);
    let checked = false;
    for (let r = 0; r < this.locals; r++) {
      if (r === this.me) continue;
      if (!checked) checked = this.await(call, r, this.locals);
      copy(this.view(call, r, dtype, count), 0, recv, r * count, count);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Gather of every rank's `send` (n elements) into `recv` at `root` in rank order (null
   * elsewhere; send is recv at the root: IN_PLACE), one way (ShmAllreduce::Gather). False as for
   * allreduce.
   */
  gather(send: TypedArray, recv: TypedArray | null, n: number, dtype: number, root: number, planHash: number): boolean {
    const call = this.begin(GATHER, dtype, 0, n * this.locals, root, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    if (root !== this.me) {
      copy(send, 0, this.view(call, this.me, dtype, n), 0, n);
      this.mark(call);
      return true;
    }
    this.mark(call);
    if (send !== recv) copy(send, 0, recv!, this.me * n, n);
    const early = this.depositWords(n * DATATYPES[dtype]!.bytes);
    let checked = false;
    for (let r = 0; r < this.locals; r++) {
      if (r === this.me) continue;
      if (!checked) checked = this.await(call, r, this.locals, early);
      copy(this.view(call, r, dtype, n), 0, recv!, r * n, n);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Scatter of `send` at `root` (size·n elements; null elsewhere) into every rank's `recv` (n
   * elements; recv is send at the root: IN_PLACE), one way (ShmAllreduce::Scatter). False as for
   * allreduce.
   */
  scatter(send: TypedArray | null, recv: TypedArray, n: number, dtype: number, root: number, planHash: number): boolean {
    const whole = n * this.locals;
    const call = this.begin(SCATTER, dtype, 0, whole, root, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    if (root === this.me) {
      copy(send!, 0, this.view(call, root, dtype, whole), 0, whole);
      this.mark(call);
      if (recv !== send) copy(send!, this.me * n, recv, 0, n);
      return true;
    }
    this.mark(call);
    this.await(call, root, root + 1, this.depositWords(whole * DATATYPES[dtype]!.bytes));
    // It saw the root's mark; at two ranks that is every mark.
    if (this.locals === 2) this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    copy(this.view(call, root, dtype, whole), this.me * n, recv, 0, n);
    return true;
  }

  /**
   * Alltoall of blocks of n elements: block j of `send` to rank j, block i of `recv` from rank i
   * (send is recv: IN_PLACE; ShmAllreduce::Alltoall). False as for allreduce.
   */
  alltoall(send: TypedArray, recv: TypedArray, n: number, dtype: number, planHash: number): boolean {
    const call = this.begin(ALLTOALL, dtype, 0, n, 0, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    const whole = n * this.locals;
    // The deposit first: with IN_PLACE the blocks below overwrite the input it copied.
    copy(send, 0, this.view(call, this.me, dtype, whole), 0, whole);
    this.mark(call);
    const at = this.me * n;
    if (send !== recv) copy(send, at, recv, at, n);
    let checked = false;
    for (let r = 0; r < this.locals; r++) {
      if (r === this.me) continue;
      if (!checked) checked = this.await(call, r, this.locals);
      copy(this.view(call, r, dtype, whole), at, recv, r * n, n);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Reduce-scatter of every rank's `send` (size·n elements; send is recv: IN_PLACE) with a
   * built-in operator, block r of the result into rank r's `recv` (ShmAllreduce::ReduceScatter).
   * False as for allreduce.
   */
  reduceScatter(send: TypedArray, recv: TypedArray, n: number, dtype: number, op: number, planHash: number): boolean {
    const whole = n * this.locals;
    const call = this.begin(REDUCE_SCATTER, dtype, op, whole, 0, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    // The deposit first: with IN_PLACE recv is the input, and its first elements get the result.
    copy(send, 0, this.view(call, this.me, dtype, whole), 0, whole);
    this.mark(call);
    const kernel = fastPathKernel(dtype, op);
    const at = this.me * n;
    let checked = false;
    for (let r = 0; r < this.locals; r++) {
      if (r !== this.me && !checked) checked = this.await(call, r, this.locals);
      const theirs = this.view(call, r, dtype, whole);
      if (r === 0) copy(theirs, at, recv, 0, n);
      else kernel(recv, theirs, n, at);
    }
    this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Inclusive (`exclusive`: exclusive) scan of n elements of `send` into `recv` with a built-in
   * operator (send is recv: IN_PLACE; ShmAllreduce::Scan): rank r reads ranks 0 … r − 1 only; an
   * exscan's rank 0 leaves recv as it was. False as for allreduce.
   */
  scan(send: TypedArray, recv: TypedArray, n: number, dtype: number, op: number, exclusive: boolean, planHash: number): boolean {
    const call = this.begin(exclusive ? EXSCAN : SCAN, dtype, op, n, 0, planHash);
    if (call < 0) return false;
    const copy = copyOf(dtype);
    // The deposit first: with IN_PLACE recv is the input (this rank's own term comes from its slot).
    copy(send, 0, this.view(call, this.me, dtype, n), 0, n);
    this.mark(call);
    const upto = exclusive ? this.me : this.me + 1;
    const kernel = fastPathKernel(dtype, op);
    let checked = false;
    for (let r = 0; r < upto; r++) {
      if (r !== this.me && !checked) checked = this.await(call, r, upto);
      const theirs = this.view(call, r, dtype, n);
      if (r === 0) copy(theirs, 0, recv, 0, n);
      else kernel(recv, theirs, n, 0);
    }
    // The last rank waited for every other mark.
    if (this.me === this.locals - 1) this.counters[CallCounter.allEntered] = (call + 1) >>> 0;
    return true;
  }

  /**
   * Steps 1–3 of a call (see the file's comment) and this call's header (`mark` writes it); returns
   * the call's number in the area, or −1 when the node was aborted or the ranks' marks did not
   * come within the spin (nothing changed then).
   */
  private begin(collective: number, dtype: number, op: number, count: number, root: number, planHash: number): number {
    const w = this.words;
    if (w[this.abortWord] !== 0) return -1;
    const c = this.counters;
    const area = c[CallCounter.areaCalls]!;
    // Whether all_entered is not past the call whose slot this one reuses (wrapping numbers).
    if (((area - this.depth + 1 - c[CallCounter.allEntered]!) | 0) >= 0 && !this.enter(area - this.depth / 2)) return -1;
    const seq = (c[CallCounter.seq]! + 1) >>> 0;
    c[CallCounter.seq] = seq;
    const kinds = (collective << MsgHeaderShift.collective) | (dtype << MsgHeaderShift.dtype) | (op << MsgHeaderShift.op);
    if (planHash !== this.hashedPlan || kinds !== this.hashedKinds || root !== this.hashedRoot || count !== this.hashedCount) {
      this.hashShape(planHash, kinds, root, count);
    }
    const h = this.header;
    h[MsgHeaderWord.seq] = seq;
    h[MsgHeaderWord.collective] = kinds;
    h[MsgHeaderWord.root] = root;
    h[MsgHeaderWord.count] = count;
    h[MsgHeaderWord.planHash] = planHash ^ c[CallCounter.previousCall]!;
    c[CallCounter.previousCall] = mix(this.hashPrefix ^ seq);
    this.unpublished = true;
    this.taken++;
    const call = c[CallCounter.areaCalls]!;
    c[CallCounter.areaCalls] = (call + 1) >>> 0;
    return call;
  }

  /**
   * Whether every other rank has entered call `target` (ShmAllreduce::EnsureEntered: its slot
   * holds target's mark or that of the call a ring later), read for a bounded spin as a wait for
   * a deposit is; records it in all_entered.
   */
  private enter(target: number): boolean {
    const want = (target + 1) >>> 0;
    for (let r = 0; r < this.locals; r++) {
      if (r === this.me) continue;
      const slot = this.slotWord(target, r);
      for (let i = 0; ; i++) {
        const ahead = (Atomics.load(this.words, slot) - want) >>> 0;
        if (ahead === 0 || ahead === this.depth) break;
        if (i === this.spin) return false;
      }
    }
    this.counters[CallCounter.allEntered] = want;
    return true;
  }

  /** CallHash's words before the call number (counts below 2^32). */
  private hashShape(planHash: number, kinds: number, root: number, count: number): void {
    let x = mix(planHash);
    x = mix(x ^ kinds);
    x = mix(x ^ root);
    x = mix(x ^ count);
    this.hashPrefix = mix(x ^ 0);
    this.hashedPlan = planHash;
    this.hashedKinds = kinds;
    this.hashedRoot = root;
    this.hashedCount = count;
  }

  /**
   * Step 3: the last fast-path call into this rank's RankControl (Liveness::PublishCall's
   * seqlock), unless it is there already or a later call through the addon published itself.
   */
  publish(): void {
    if (!this.unpublished) return;
    this.unpublished = false;
    const w = this.words;
    const l = this.layout;
    const control = (l.controls + this.me * l.controlStride) >>> 2;
    const published = control + (l.call >>> 2);
    if (((this.header[MsgHeaderWord.seq]! - w[published + MsgHeaderWord.seq]!) | 0) <= 0) return;
    const version = control + (l.callVersion >>> 2);
    const v = w[version]!;
    Atomics.store(w, version, v + 1);
    for (let k = 0; k <= (MsgHeaderWord.sender as number); k++) w[published + k] = this.header[k]!;
    Atomics.store(w, version, v + 2);
  }

  /**
   * Writes the header into this rank's slot of `call`, after its data (ShmAllreduce::Deposit's
   * order: the mark's line, which holds the header, is written in one burst just before the
   * mark), publishes the deposit and rings the peers that sleep (ShmAllreduce::MarkDeposited).
   */
  private mark(call: number): void {
    const w = this.words;
    const slot = this.slotWord(call, this.me);
    const h = this.header;
    for (let k = 0; k <= (MsgHeaderWord.sender as number); k++) w[slot + this.headerWord + k] = h[k]!;
    if (this.asymmetric) w[slot] = (call + 1) >>> 0;
    else Atomics.exchange(w, slot, (call + 1) >>> 0);
    for (let r = 0; r < this.locals; r++) {
      if (r === this.me) continue;
      const idle = this.idleWord[r]!;
      if (w[idle] !== 0) w[idle] = 0;
      if (w[this.sleepingWord[r]!] !== 0) this.engine.ringLocal(r);
    }
  }

  /**
   * Waits for local rank r's deposit of `call` and checks its header; true when the addon did
   * (it then waited for and checked every rank up to `to` − 1 too). `early`: the words of r's
   * slot the deposit spans, for a one-way call's reader — its writer has usually long written
   * the deposit, so the deposit's later cache lines are read together with the mark's and their
   * transfers overlap, instead of following the mark's when the copy reads them. (The values
   * read are not used: x86 keeps loads in order, so the copy after the mark reads what the mark
   * published. Every-rank calls pass nothing: their peers are usually still writing, and an
   * early read then takes a line away from its writer. See ShmAllreduce::PrefetchDeposit.)
   */
  private await(call: number, r: number, to: number, early = 0): boolean {
    const w = this.words;
    const slot = this.slotWord(call, r);
    const want = (call + 1) >>> 0;
    let touched = 0;
    for (let k = LINE_WORDS; k < early; k += LINE_WORDS) touched ^= w[slot + k]!;
    this.touched = touched;
    if (w[slot] !== want) {
      for (let i = 0; Atomics.load(w, slot) !== want; i++) {
        if (i === this.spin) {
          this.publish();
          this.engine.awaitAreaDeposits(call, r, to);
          return true;
        }
      }
    }
    // This rank's header with local rank r (= its global rank: one node) as the sender.
    const h = this.header;
    const theirs = slot + this.headerWord;
    let same = w[theirs + MsgHeaderWord.sender] === r;
    // Every word before the sender's, the last one.
    for (let k = 0; k < (MsgHeaderWord.sender as number) && same; k++) same = w[theirs + k] === h[k];
    if (same) return false;
    // The executor's EMISMATCH, raised as it raises it (and the node aborted).
    this.publish();
    this.engine.awaitAreaDeposits(call, r, to);
    throw new Error(`the fast path saw a header from local rank ${r} that the executor accepted`);
  }

  /** Words of a slot that a one-way deposit of `bytes` spans, for `await`'s early reads (none above EARLY_READ_MAX_BYTES). */
  private depositWords(bytes: number): number {
    return bytes > EARLY_READ_MAX_BYTES ? 0 : (this.layout.slotData + bytes + 3) >>> 2;
  }

  /** Word index of the mark of local rank r's slot for `call`. */
  private slotWord(call: number, r: number): number {
    return this.slotsWord + ((call & (this.depth - 1)) * this.locals + r) * this.slotWords;
  }

  /** A view of `n` elements of `dtype` over local rank r's slot data of `call` (cached). */
  private view(call: number, r: number, dtype: number, n: number): TypedArray {
    const slot = (call & (this.depth - 1)) * this.locals + r;
    const key = slot * DTYPES + dtype;
    const cached = this.views[key];
    if (cached !== undefined && cached.length === n) return cached;
    const l = this.layout;
    const at = l.slots + slot * l.slotStride + l.slotData;
    const type = DATATYPES[dtype]!;
    const made = new type.array(this.words.buffer as ArrayBuffer, at, Math.min(n, l.slotDataBytes / type.bytes));
    this.views[key] = made;
    return made;
  }
}
