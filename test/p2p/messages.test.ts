import { describe, expect, it, vi } from 'vitest';
import { ANY_SOURCE, ANY_TAG, MAX_TAG, MessageRequest, Messages } from '../../src/p2p/messages.js';
import type { NativeMessageStatus, NativeMessages } from '../../src/native.js';
import { TopocollError } from '../../src/errors.js';

/**
 * src/p2p/messages.ts without processes: arguments are refused before anything reaches the
 * addon, statuses count elements of the receive buffer's type, requests learn their end from
 * test()/wait() or their Promise (whichever first), blocking forms are refused where blocking
 * calls are, and close() reports the messages never received. The addon is a recording stand-in.
 */

interface Posted {
  kind: 0 | 1;
  peer: number;
  tag: number;
  resolve: (s: NativeMessageStatus) => void;
  reject: (e: unknown) => void;
}

function fakeNative(outcomes: Map<number, NativeMessageStatus | Error> = new Map()) {
  const posted: Posted[] = [];
  const calls: string[] = [];
  const native = {
    sendSync: (_b: ArrayBufferView, dest: number, tag: number) => calls.push(`sendSync ${dest} ${tag}`),
    recvSync: (b: ArrayBufferView | null, source: number, tag: number): NativeMessageStatus => {
      calls.push(`recvSync ${source} ${tag}`);
      return b === null ? [1, 5, 3, new Uint8Array([255, 255, 255]).buffer] : [2, 7, 12];
    },
    post: (kind: 0 | 1, _b: ArrayBufferView | null, peer: number, tag: number) => {
      let resolve!: Posted['resolve'];
      let reject!: Posted['reject'];
      const done = new Promise<NativeMessageStatus>((a, b) => {
        resolve = a;
        reject = b;
      });
      posted.push({ kind, peer, tag, resolve, reject });
      calls.push(`post ${kind} ${peer} ${tag}`);
      return { id: posted.length, done };
    },
    test: (id: number): false | NativeMessageStatus => {
      const o = outcomes.get(id);
      if (o instanceof Error) throw o;
      return o ?? false;
    },
    wait: (id: number): NativeMessageStatus => {
      const o = outcomes.get(id);
      if (o instanceof Error) throw o;
      if (o === undefined) throw new Error(`wait(${id}) would block`);
      return o;
    },
    close: (): [number, number][] => [
      [0, 3],
      [2, 1],
    ],
  };
  return { native: native as unknown as NativeMessages, posted, calls };
}

const allowBlocking = { ensureBlocking: () => undefined };

describe('Messages: checks before anything is sent', () => {
  const { native, calls } = fakeNative();
  const m = new Messages(native, 1, 4, () => undefined, allowBlocking);
  const buf = new Uint8Array(8);

  it.each([
    ['tag -1', () => m.sendSync(buf, 0, -1)],
    ['tag 2^31', () => m.sendSync(buf, 0, MAX_TAG + 1)],
    ['tag 1.5', () => m.isend(buf, 0, 1.5)],
    ['dest = size', () => m.sendSync(buf, 4, 0)],
    ['dest -1', () => m.isend(buf, -1, 0)],
    ['source = size', () => m.recvSync(buf, 4, 0)],
    ['source -2', () => m.irecv(buf, -2, 0)],
    ['receive tag -2', () => m.recvSync(buf, 0, -2)],
    ['an array for a buffer', () => m.sendSync([1, 2] as unknown as Uint8Array, 0, 0)],
    ['a DataView for a buffer', () => m.irecv(new DataView(new ArrayBuffer(4)) as unknown as Uint8Array, 0, 0)],
    ['an uncloneable value', () => m.sendObjectSync({ f: () => 1 }, 0, 0)],
    ['a resizable buffer in flight', () => m.isend(new Uint8Array(new (ArrayBuffer as any)(8, { maxByteLength: 16 })), 0, 0)],
  ])('%s: EINVAL naming the rank, nothing posted', (_, f) => {
    const before = calls.length;
    expect(f).toThrow(TopocollError);
    try {
      f();
    } catch (e) {
      expect((e as TopocollError).code).toBe('EINVAL');
      expect((e as TopocollError).rank).toBe(1);
    }
    expect(calls.length).toBe(before);
  });

  it('wildcards and the largest tag are accepted', () => {
    expect(ANY_SOURCE).toBe(-1);
    expect(ANY_TAG).toBe(-1);
    m.recvSync(buf, ANY_SOURCE, ANY_TAG);
    m.sendSync(buf, 3, MAX_TAG);
    expect(calls.slice(-2)).toEqual([`recvSync -1 -1`, `sendSync 3 ${MAX_TAG}`]);
  });

  it('a closed communicator is ECLOSED before anything else', () => {
    const closed = new Messages(
      native,
      0,
      2,
      () => {
        throw new TopocollError('ECLOSED', 'the communicator is closed');
      },
      allowBlocking,
    );
    expect(() => closed.sendSync(buf, 9, -5)).toThrow(/ECLOSED/);
  });

  it('blocking forms are refused where blocking calls are, before anything is sent', () => {
    const refuse = {
      ensureBlocking: () => {
        throw new TopocollError('EINVAL', 'over a JavaScript layer');
      },
    };
    const layer = new Messages(native, 0, 2, () => undefined, refuse);
    const before = calls.length;
    expect(() => layer.sendSync(buf, 1, 0)).toThrow(/JavaScript layer/);
    expect(() => layer.recvSync(buf, 1, 0)).toThrow(/JavaScript layer/);
    expect(() => layer.recvObjectSync(1, 0)).toThrow(/JavaScript layer/);
    expect(calls.length).toBe(before);
    const r = layer.irecv(buf, 1, 0);
    expect(() => r.wait()).toThrow(/JavaScript layer/);
  });
});

describe('Messages: statuses, objects and the close notice', () => {
  it('count is in elements of the receive buffer, floor of the bytes', () => {
    const { native } = fakeNative();
    const m = new Messages(native, 0, 4, () => undefined, allowBlocking);
    expect(m.recvSync(new Float32Array(8), 2, 7)).toEqual({ source: 2, tag: 7, count: 3 });
    expect(m.recvSync(new Float64Array(8), 2, 7)).toEqual({ source: 2, tag: 7, count: 1 });
    expect(m.recvSync(new Uint8Array(12), 2, 7)).toEqual({ source: 2, tag: 7, count: 12 });
  });

  it('recvObject bytes that are not a serialised value: EINVAL naming source and tag', () => {
    const { native } = fakeNative();
    const m = new Messages(native, 0, 4, () => undefined, allowBlocking);
    expect(() => m.recvObjectSync(1, 5)).toThrow(/rank 1 with tag 5 is not a serialised value/);
  });

  it('close() writes the messages never received, per source', () => {
    const { native } = fakeNative();
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      new Messages(native, 3, 4, () => undefined, allowBlocking).close();
      expect(write).toHaveBeenCalledWith('topocoll: rank 3: close() with 4 messages never received (from rank 0: 3, rank 2: 1)\n');
    } finally {
      write.mockRestore();
    }
  });
});

describe('MessageRequest: the first outcome learnt is the outcome', () => {
  it('test() before and after the end; wait() and await give the same status', async () => {
    const outcomes = new Map<number, NativeMessageStatus | Error>();
    const { native, posted } = fakeNative(outcomes);
    const m = new Messages(native, 0, 4, () => undefined, allowBlocking);
    const r = m.irecv(new Int32Array(4), 2, 9);
    expect(r.test()).toBe(false);
    outcomes.set(1, [2, 9, 8]);
    expect(r.test()).toBe(true);
    expect(r.wait()).toEqual({ source: 2, tag: 9, count: 2 });
    posted[0]!.resolve([2, 9, 8]);
    expect(await r).toEqual({ source: 2, tag: 9, count: 2 });
  });

  it('a failure learnt by test() is thrown by test(), wait() and await alike', async () => {
    const outcomes = new Map<number, NativeMessageStatus | Error>();
    const { native, posted } = fakeNative(outcomes);
    const m = new Messages(native, 0, 4, () => undefined, allowBlocking);
    const r: MessageRequest<unknown> = m.irecv(new Uint8Array(4), 1, 1);
    const truncated = new TopocollError('ETRUNCATE', 'the message from rank 1 with tag 1 has 9 bytes');
    outcomes.set(1, truncated);
    expect(() => r.test()).toThrow(truncated);
    expect(() => r.wait()).toThrow(truncated);
    posted[0]!.reject(truncated);
    await expect(Promise.resolve(r)).rejects.toBe(truncated);
  });

  it('a request settled by its Promise alone answers test() without the addon', async () => {
    const { native, posted } = fakeNative();
    const m = new Messages(native, 0, 4, () => undefined, allowBlocking);
    const s = m.isend(new Uint8Array(4), 1, 1);
    posted[0]!.resolve([-1, -1, 0]);
    await s;
    expect(s.test()).toBe(true);
    expect(s.wait()).toBeUndefined();
  });
});
