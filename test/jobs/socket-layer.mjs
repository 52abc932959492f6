// @ts-check
// A point-to-point layer written for the tests, as a host messaging layer would be: every rank
// listens on a Unix socket <dir>/rank-<r>.sock; a sender connects once per peer (lazily, on its
// first send) and writes a hello [rank u32], then frames [tag u32][length u32][sequence u32]
// [bytes] — the sequence numbers a sender's messages to one peer in the order send() was called,
// so the receiver can count messages that overtook others; the receiver queues them per
// (peer, tag). When a peer's connection to this rank ends (it closed its layer, exited or was
// killed), receives from it that wait or come later fail with "rank X closed its connection"
// once the messages it sent before are taken. send() settles once the kernel has the frame;
// close() lets sends in flight finish first. The socket file is removed on close() and at exit
// (not after SIGKILL). Nothing of the layer keeps the process alive. Faults can be injected to
// check that topocoll reports them (never a hang, never wrong data).
import { rmSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';

/**
 * @typedef {object} Faults
 * @property {number} [dropAfter] drop every message this rank sends on `faultTag` after this many
 * @property {number} [rejectAfter] reject every send on `faultTag` after this many
 * @property {number} [maxDelayMs] delay each message by a random time up to this after the previous one of its (peer, tag), so tags overtake each other
 * @property {number} [killAfter] SIGKILL this process instead of sending message `killAfter` + 1 on `faultTag` (a rank that dies in the middle of a collective, even of a message)
 * @property {number} [faultTag] the tag the faults apply to (default: every tag)
 */

/**
 * @typedef {import('topocoll').PointToPoint & {
 *   close(): Promise<void>,
 *   readonly socketPath: string,
 *   stats(tag: number): { sent: number, dropped: number, rejected: number, overtaken: number },
 * }} SocketLayer
 */

/** @typedef {{ resolve: (m: Uint8Array) => void, reject: (e: Error) => void }} Waiter */

/**
 * This rank's layer as `topocoll run` started it: its sockets in $TOPOCOLL_P2P_DIR, the rank and
 * size from $TOPOCOLL_RANK and $TOPOCOLL_SIZE.
 * @returns {Promise<SocketLayer>}
 */
export function socketLayerOfJob() {
  return socketLayer(/** @type {string} */ (process.env.TOPOCOLL_P2P_DIR), Number(process.env.TOPOCOLL_RANK), Number(process.env.TOPOCOLL_SIZE));
}

/**
 * @param {string} dir
 * @param {number} rank
 * @param {number} size
 * @param {Faults} [faults]
 * @returns {Promise<SocketLayer>}
 */
export async function socketLayer(dir, rank, size, faults = {}) {
  mkdirSync(dir, { recursive: true });
  const socketPath = join(dir, `rank-${rank}.sock`);
  /** Messages received and not yet asked for, per peer and tag. @type {Map<number, Map<number, Uint8Array[]>>} */
  const queues = new Map();
  /** Receives waiting for a message, per peer and tag. @type {Map<number, Map<number, Waiter[]>>} */
  const waiting = new Map();
  /** Peers whose connection to this rank ended, and how. @type {Map<number, string>} */
  const ended = new Map();
  /** @type {Map<number, Promise<net.Socket>>} */
  const outgoing = new Map();
  /** @type {Set<net.Socket>} */
  const incoming = new Set();
  /** Sends not yet written to the kernel: close() lets them finish. @type {Set<Promise<void>>} */
  const inFlight = new Set();
  let closed = false;
  /** Messages received after one its sender had sent later (any tag). */
  let overtaken = 0;

  /** @type {<V>(m: Map<number, Map<number, V[]>>, peer: number, tag: number) => V[]} */
  const listOf = (m, peer, tag) => {
    let byTag = m.get(peer);
    if (byTag === undefined) m.set(peer, (byTag = new Map()));
    let list = byTag.get(tag);
    if (list === undefined) byTag.set(tag, (list = []));
    return list;
  };
  const endedError = (/** @type {number} */ peer) => new Error(`rank ${peer} closed its connection (${ended.get(peer)})`);

  const deliver = (/** @type {number} */ peer, /** @type {number} */ tag, /** @type {Uint8Array} */ bytes) => {
    const w = listOf(waiting, peer, tag).shift();
    if (w !== undefined) w.resolve(bytes);
    else listOf(queues, peer, tag).push(bytes);
  };

  const peerEnded = (/** @type {number} */ peer, /** @type {string} */ how) => {
    if (ended.has(peer)) return;
    ended.set(peer, how);
    for (const list of waiting.get(peer)?.values() ?? []) for (const w of list.splice(0)) w.reject(endedError(peer));
  };

  const server = net.createServer((socket) => {
    // Like the server and the outgoing connections, nothing of the layer keeps the process alive:
    // a receive topocoll waits for belongs to a collective whose Promise does.
    socket.unref();
    incoming.add(socket);
    let peer = -1;
    /** Bytes received and not parsed yet, as chunks (concatenated only when a frame is complete). @type {Buffer[]} */
    let chunks = [];
    let have = 0;
    let latest = -1;
    /** Takes n bytes off the front of the chunks (n ≤ have). */
    const take = (/** @type {number} */ n) => {
      const all = chunks.length === 1 ? /** @type {Buffer} */ (chunks[0]) : Buffer.concat(chunks, have);
      const out = all.subarray(0, n);
      const rest = all.subarray(n);
      chunks = rest.length > 0 ? [rest] : [];
      have -= n;
      return out;
    };
    /** The frame at the front: [tag, length, sequence], once its 12 header bytes are in. */
    const peek = () => {
      if (/** @type {Buffer} */ (chunks[0]).length < 12) chunks = [Buffer.concat(chunks, have)];
      const head = /** @type {Buffer} */ (chunks[0]);
      return [head.readUInt32LE(0), head.readUInt32LE(4), head.readUInt32LE(8)];
    };
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      have += chunk.length;
      if (peer < 0) {
        if (have < 4) return;
        peer = take(4).readUInt32LE(0);
      }
      while (have >= 12) {
        const [tag, length, sequence] = /** @type {[number, number, number]} */ (peek());
        if (have < 12 + length) break;
        const frame = take(12 + length);
        if (sequence < latest) overtaken++;
        latest = Math.max(latest, sequence);
        deliver(peer, tag, new Uint8Array(frame.subarray(12)));
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      incoming.delete(socket);
      if (peer >= 0) peerEnded(peer, have > 0 ? `in the middle of a frame` : 'after a whole frame');
    });
  });
  rmSync(socketPath, { force: true });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve(undefined));
  });
  server.unref();
  const removeSocketFile = () => rmSync(socketPath, { force: true });
  process.on('exit', removeSocketFile);

  const connect = (/** @type {number} */ peer) => {
    let c = outgoing.get(peer);
    if (c === undefined) {
      c = new Promise((resolve, reject) => {
        const deadline = Date.now() + 30_000;
        const attempt = () => {
          const s = net.connect(join(dir, `rank-${peer}.sock`));
          s.once('connect', () => {
            s.removeAllListeners('error');
            s.on('error', () => undefined);
            s.unref();
            const hello = Buffer.alloc(4);
            hello.writeUInt32LE(rank);
            s.write(hello);
            resolve(s);
          });
          s.once('error', (e) => {
            // The peer may not listen yet; a peer known to be gone will not.
            if (Date.now() > deadline || ended.has(peer) || closed) reject(e);
            else setTimeout(attempt, 10);
          });
        };
        attempt();
      });
      outgoing.set(peer, c);
    }
    return c;
  };

  /** Writes a frame; settles once the kernel has it (or the socket failed). */
  const write = (/** @type {net.Socket} */ socket, /** @type {Buffer} */ frame) =>
    /** @type {Promise<void>} */ (
      new Promise((resolve, reject) => {
        if (socket.destroyed || !socket.writable) reject(new Error('the connection is closed'));
        else socket.write(frame, (e) => (e ? reject(e) : resolve()));
      })
    );

  /** Messages sent per tag (every peer), counting those the faults dropped or rejected. @type {Map<number, number>} */
  const sentOnTag = new Map();
  /** The next sequence number per peer. @type {Map<number, number>} */
  const sequences = new Map();
  /** @type {Map<number, { dropped: number, rejected: number }>} */
  const faulted = new Map();
  const faultedOn = (/** @type {number} */ tag) => {
    let f = faulted.get(tag);
    if (f === undefined) faulted.set(tag, (f = { dropped: 0, rejected: 0 }));
    return f;
  };
  /** The last delayed message per peer and tag, which the next one waits for. @type {Map<number, Map<number, Promise<void>[]>>} */
  const chains = new Map();
  const applies = (/** @type {number} */ tag) => faults.faultTag === undefined || faults.faultTag === tag;

  /**
   * @param {number} peer
   * @param {number} tag
   * @param {Uint8Array} data
   */
  const send = async (peer, tag, data) => {
    if (!(data instanceof Uint8Array)) throw new TypeError('send: data must be a Uint8Array');
    if (!Number.isInteger(peer) || peer < 0 || peer >= size) throw new RangeError(`send: no rank ${peer}`);
    if (closed) throw new Error('send: the layer is closed');
    const n = (sentOnTag.get(tag) ?? 0) + 1;
    sentOnTag.set(tag, n);
    if (applies(tag) && faults.killAfter !== undefined && n > faults.killAfter) process.kill(process.pid, 'SIGKILL');
    if (applies(tag) && faults.rejectAfter !== undefined && n > faults.rejectAfter) {
      faultedOn(tag).rejected++;
      throw new Error(`injected failure of send #${n} on tag ${tag} to rank ${peer}`);
    }
    if (applies(tag) && faults.dropAfter !== undefined && n > faults.dropAfter) {
      faultedOn(tag).dropped++;
      return;
    }
    const frame = Buffer.alloc(12 + data.byteLength);
    frame.writeUInt32LE(tag, 0);
    frame.writeUInt32LE(data.byteLength, 4);
    const sequence = sequences.get(peer) ?? 0;
    sequences.set(peer, sequence + 1);
    frame.writeUInt32LE(sequence, 8);
    frame.set(data, 12);
    const socket = await connect(peer);
    if (applies(tag) && faults.maxDelayMs !== undefined) {
      // Each message waits a random time after the previous one of its (peer, tag): one tag's
      // messages stay in order, different tags' overtake each other (the contract allows it).
      const chain = listOf(chains, peer, tag);
      const next = (chain[0] ?? Promise.resolve())
        .catch(() => undefined)
        .then(() => new Promise((r) => setTimeout(r, Math.random() * (faults.maxDelayMs ?? 0))))
        .then(() => write(socket, frame));
      chain[0] = next;
      return next;
    }
    return write(socket, frame);
  };

  return {
    rank,
    size,
    socketPath,
    stats: (tag) => ({ sent: sentOnTag.get(tag) ?? 0, ...faultedOn(tag), overtaken }),
    send(peer, tag, data) {
      const p = send(peer, tag, data);
      const tracked = p.catch(() => undefined);
      inFlight.add(tracked);
      void tracked.then(() => inFlight.delete(tracked));
      return p;
    },
    recv(peer, tag, maxBytes) {
      const check = (/** @type {Uint8Array} */ m) => {
        if (m.byteLength > maxBytes) throw new Error(`a message of ${m.byteLength} bytes from rank ${peer} on tag ${tag} exceeds ${maxBytes}`);
        return m;
      };
      const q = listOf(queues, peer, tag);
      if (q.length > 0) {
        try {
          return Promise.resolve(check(/** @type {Uint8Array} */ (q.shift())));
        } catch (e) {
          return Promise.reject(e);
        }
      }
      if (ended.has(peer)) return Promise.reject(endedError(peer));
      if (closed) return Promise.reject(new Error('recv: the layer is closed'));
      return new Promise((resolve, reject) => {
        listOf(waiting, peer, tag).push({
          resolve: (m) => {
            try {
              resolve(check(m));
            } catch (e) {
              reject(e);
            }
          },
          reject,
        });
      });
    },
    /** Lets sends in flight reach the kernel, ends the connections, stops listening, removes the socket file. */
    async close() {
      if (closed) return;
      closed = true;
      await Promise.race([Promise.all(inFlight), new Promise((r) => setTimeout(r, 2000).unref())]);
      for (const c of outgoing.values()) void c.then((s) => s.end()).catch(() => undefined);
      for (const s of incoming) s.destroy();
      await new Promise((r) => server.close(() => r(undefined)));
      removeSocketFile();
      process.off('exit', removeSocketFile);
    },
  };
}
