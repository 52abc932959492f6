import { deserialize, serialize } from 'node:v8';
import { markAsUntransferable } from 'node:worker_threads';
import { MESSAGES_ANY_SOURCE, MESSAGES_ANY_TAG, MESSAGES_MAX_TAG } from '../abi.generated.js';
import { TopocollError } from '../errors.js';
import type { NativeEngine, NativeMessageOp, NativeMessages, NativeMessageStatus } from '../native.js';
import type { TypedArray } from '../util/typed-array.js';

/**
 * A communicator's point-to-point messages (MPI_Send/Recv/Sendrecv/Isend/Irecv, mpi4py's
 * send/recv of objects): the argument checks, the Sync, Promise and request forms, and the
 * object forms. The messages travel on streams of their own, apart from the collectives', run by
 * a progress thread of their own (native/src/messages/message_streams.h): a receive never
 * matches collective traffic, and a message in flight never waits for a collective nor a
 * collective for it.
 */

/** A receive's wildcard source: a message from any rank (abi/abi.yaml, as the addon has it). */
export const ANY_SOURCE = MESSAGES_ANY_SOURCE;
/** A receive's wildcard tag: a message with any tag. */
export const ANY_TAG = MESSAGES_ANY_TAG;
/** The largest tag (tags are 0 … 2³¹−1). */
export const MAX_TAG = MESSAGES_MAX_TAG;

/** What a receive got: the message's source and tag, and its length in elements of the receive buffer's type. */
export interface MessageStatus {
  source: number;
  tag: number;
  count: number;
}

/** A received object and where it came from. */
export interface ObjectMessage<T = unknown> {
  value: T;
  source: number;
  tag: number;
}

const SEND = 0;
const RECV = 1;

/**
 * A point-to-point message in flight (MPI's request), made by `isend` and `irecv`. `test()` says
 * whether it has completed (MPI_Test), `wait()` blocks the calling thread until it has
 * (MPI_Wait), `await request` waits without blocking the event loop; an irecv's `wait()` and
 * `await` give its status. A message that failed throws its TopocollError from each of the
 * three. Until it has completed, the buffer belongs to it (the request keeps it alive).
 */
export class MessageRequest<T> implements PromiseLike<T> {
  private outcome?: { failed: true; error: unknown } | { failed: false; value: T };
  private readonly settled: Promise<T>;

  /** @internal made by Messages */
  constructor(
    private readonly native: NativeMessages,
    private readonly op: NativeMessageOp,
    private readonly result: (status: NativeMessageStatus) => T,
    private readonly blocking: () => void,
  ) {
    this.settled = op.done.then(
      (status) => this.end({ failed: false, value: result(status) }),
      (error: unknown) => this.end({ failed: true, error }),
    );
    // A request nobody awaits must not end the process as an unhandled rejection.
    this.settled.catch(() => undefined);
  }

  /** Whether the message has completed (MPI_Test); throws its error if it failed. Never blocks. */
  test(): boolean {
    if (this.outcome === undefined) {
      let status: false | NativeMessageStatus;
      try {
        status = this.native.test(this.op.id);
      } catch (error) {
        this.end({ failed: true, error });
        return true;
      }
      if (status === false) return false;
      this.end({ failed: false, value: this.result(status) });
    }
    this.unwrap(this.outcome!);
    return true;
  }

  /**
   * Blocks until the message has completed (MPI_Wait); an irecv's status. Throws its error if it
   * failed. Refused (EINVAL) where blocking collectives are: over a JavaScript layer between nodes.
   */
  wait(): T {
    if (this.outcome === undefined) {
      this.blocking();
      try {
        this.end({ failed: false, value: this.result(this.native.wait(this.op.id)) });
      } catch (error) {
        this.end({ failed: true, error });
      }
    }
    return this.unwrap(this.outcome!);
  }

  then<A = T, B = never>(
    onfulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.settled.then(onfulfilled, onrejected);
  }

  /** Records the first outcome learnt (test/wait, or the Promise); the Promise's value follows it. */
  private end(outcome: NonNullable<typeof this.outcome>): T {
    this.outcome ??= outcome;
    return this.unwrap(this.outcome);
  }

  private unwrap(outcome: NonNullable<typeof this.outcome>): T {
    if (outcome.failed) throw outcome.error;
    return outcome.value;
  }
}

/** One communicator's messages: made by Communicator, which forwards its methods here. */
export class Messages {
  constructor(
    private readonly native: NativeMessages,
    private readonly rank: number,
    private readonly size: number,
    private readonly ensureOpen: () => void,
    /** Says whether this thread may block (not over a JavaScript layer between nodes). */
    private readonly engine: Pick<NativeEngine, 'ensureBlocking'>,
  ) {}

  private readonly refuse = (): void => this.engine.ensureBlocking();

  /** The blocking forms' check: refused (EINVAL) where blocking collectives are. */
  private blocking(): void {
    this.engine.ensureBlocking();
  }

  sendSync(buf: TypedArray, dest: number, tag: number): void {
    this.checkSend('sendSync', buf, dest, tag);
    this.blocking();
    this.native.sendSync(buf, dest, tag);
  }

  recvSync(buf: TypedArray, source: number, tag: number): MessageStatus {
    this.checkRecv('recvSync', buf, source, tag);
    this.blocking();
    return statusOf(this.native.recvSync(buf, source, tag), buf);
  }

  sendrecvSync(sendBuf: TypedArray, dest: number, sendTag: number, recvBuf: TypedArray, source: number, recvTag: number): MessageStatus {
    this.checkSend('sendrecvSync', sendBuf, dest, sendTag);
    this.checkRecv('sendrecvSync', recvBuf, source, recvTag);
    this.blocking();
    // Both posted before either is waited for: two ranks that sendrecv with each other both proceed.
    const recv = this.native.post(RECV, recvBuf, source, recvTag);
    const send = this.native.post(SEND, sendBuf, dest, sendTag);
    // The outcomes are taken here, by wait: their Promises' rejections are nobody's.
    recv.done.catch(() => undefined);
    send.done.catch(() => undefined);
    // A failed send still waits for the receive: it stays posted, and would take a later message.
    let failure: Error | undefined;
    try {
      this.native.wait(send.id);
    } catch (e) {
      failure = e as Error;
    }
    const status = this.native.wait(recv.id);
    if (failure !== undefined) throw failure;
    return statusOf(status, recvBuf);
  }

  isend(buf: TypedArray, dest: number, tag: number): MessageRequest<void> {
    this.checkSend('isend', buf, dest, tag);
    this.hold('isend', buf);
    return new MessageRequest(this.native, this.native.post(SEND, buf, dest, tag), () => undefined, this.refuse);
  }

  irecv(buf: TypedArray, source: number, tag: number): MessageRequest<MessageStatus> {
    this.checkRecv('irecv', buf, source, tag);
    this.hold('irecv', buf);
    return new MessageRequest(this.native, this.native.post(RECV, buf, source, tag), (s) => statusOf(s, buf), this.refuse);
  }

  async sendrecv(sendBuf: TypedArray, dest: number, sendTag: number, recvBuf: TypedArray, source: number, recvTag: number): Promise<MessageStatus> {
    this.checkSend('sendrecv', sendBuf, dest, sendTag);
    this.checkRecv('sendrecv', recvBuf, source, recvTag);
    const recv = this.irecv(recvBuf, source, recvTag);
    const send = this.isend(sendBuf, dest, sendTag);
    const [, status] = await Promise.all([send, recv]);
    return status;
  }

  sendObjectSync(value: unknown, dest: number, tag: number): void {
    const bytes = this.serialise('sendObjectSync', value, dest, tag);
    this.blocking();
    this.native.sendSync(bytes, dest, tag);
  }

  sendObject(value: unknown, dest: number, tag: number): Promise<void> {
    try {
      const bytes = this.serialise('sendObject', value, dest, tag);
      return Promise.resolve(new MessageRequest(this.native, this.native.post(SEND, bytes, dest, tag), () => undefined, this.refuse));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  recvObjectSync<T>(source: number, tag: number): ObjectMessage<T> {
    this.checkRecv('recvObjectSync', undefined, source, tag);
    this.blocking();
    return objectOf<T>(this.native.recvSync(null, source, tag));
  }

  recvObject<T>(source: number, tag: number): Promise<ObjectMessage<T>> {
    try {
      this.checkRecv('recvObject', undefined, source, tag);
      return Promise.resolve(new MessageRequest(this.native, this.native.post(RECV, null, source, tag), (s) => objectOf<T>(s), this.refuse));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Ends what is pending with ECLOSED; reports the messages that arrived and were never received. */
  close(): void {
    const unreceived = this.native.close();
    if (unreceived.length === 0) return;
    const total = unreceived.reduce((n, [, count]) => n + count, 0);
    const from = unreceived.map(([source, count]) => `rank ${source}: ${count}`).join(', ');
    process.stderr.write(`topocoll: rank ${this.rank}: close() with ${total} message${total === 1 ? '' : 's'} never received (from ${from})\n`);
  }

  // --- checks: everything is validated before anything is sent ---

  private serialise(what: string, value: unknown, dest: number, tag: number): Uint8Array {
    this.checkSend(what, undefined, dest, tag);
    try {
      const b = serialize(value);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    } catch (e) {
      throw new TopocollError('EINVAL', `${what}: the value cannot be cloned (v8.serialize): ${(e as Error).message}`, {
        rank: this.rank,
        hint: 'Values travel by structured clone: no functions, symbols, class prototypes or native handles.',
      });
    }
  }

  private checkSend(what: string, buf: TypedArray | undefined, dest: number, tag: number): void {
    this.ensureOpen();
    if (buf !== undefined) this.checkBuffer(what, buf);
    if (!Number.isInteger(dest) || dest < 0 || dest >= this.size) this.fail(`${what}: dest ${String(dest)} is not a rank (0 … ${this.size - 1})`);
    if (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG) this.fail(`${what}: tag ${String(tag)} is not an integer in 0 … ${MAX_TAG}`);
  }

  private checkRecv(what: string, buf: TypedArray | undefined, source: number, tag: number): void {
    this.ensureOpen();
    if (buf !== undefined) this.checkBuffer(what, buf);
    if (source !== ANY_SOURCE && (!Number.isInteger(source) || source < 0 || source >= this.size)) {
      this.fail(`${what}: source ${String(source)} is not a rank (0 … ${this.size - 1}) nor ANY_SOURCE`);
    }
    if (tag !== ANY_TAG && (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG))
      this.fail(`${what}: tag ${String(tag)} is not an integer in 0 … ${MAX_TAG} nor ANY_TAG`);
  }

  /**
   * A buffer the progress thread reads or writes after the call returned: a resizable
   * ArrayBuffer could shrink under it (refused, EINVAL, before anything is posted), and an
   * ArrayBuffer transferred away would be freed under it (marked untransferable, as the
   * collectives' requests do: src/collectives/call-context.ts).
   */
  private hold(what: string, buf: TypedArray): void {
    const b = buf.buffer as ArrayBufferLike & { resizable?: boolean; growable?: boolean };
    if (b.resizable === true || b.growable === true) {
      throw new TopocollError(
        'EINVAL',
        `${what}: a buffer over a resizable ArrayBuffer cannot be used by a message in flight: it could shrink while the progress thread uses it`,
        {
          rank: this.rank,
          hint: 'Pass a fixed-length ArrayBuffer, or use the Sync form.',
        },
      );
    }
    if (b instanceof ArrayBuffer) markAsUntransferable(b);
  }

  private checkBuffer(what: string, buf: TypedArray): void {
    if (!ArrayBuffer.isView(buf) || buf instanceof DataView) this.fail(`${what}: the buffer is not a TypedArray`);
  }

  private fail(detail: string): never {
    throw new TopocollError('EINVAL', detail, { rank: this.rank });
  }
}

function statusOf(s: NativeMessageStatus, buf: TypedArray): MessageStatus {
  return { source: s[0], tag: s[1], count: Math.floor(s[2] / buf.BYTES_PER_ELEMENT) };
}

function objectOf<T>(s: NativeMessageStatus): ObjectMessage<T> {
  let value: T;
  try {
    value = deserialize(new Uint8Array(s[3]!)) as T;
  } catch (e) {
    throw new TopocollError('EINVAL', `recvObject: the message from rank ${s[0]} with tag ${s[1]} is not a serialised value: ${(e as Error).message}`);
  }
  return { value, source: s[0], tag: s[1] };
}
