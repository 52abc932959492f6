// A point-to-point layer written for the tests, as a host messaging layer would be: every rank
// listens on a Unix socket <dir>/rank-<r>.sock; a sender connects once per peer and writes
// frames [tag u32][length u32][bytes]; the receiver queues them per (peer, tag). Faults can be
// injected to check that topocoll reports them (never a hang, never wrong data).
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';

/**
 * @typedef {object} Faults
 * @property {number} [dropAfter] drop every message this rank sends on `faultTag` after this many
 * @property {number} [rejectAfter] reject every send on `faultTag` after this many
 * @property {number} [maxDelayMs] delay each message by a random time up to this after the previous one of its tag (so tags overtake each other)
 * @property {number} [faultTag] the tag the faults apply to (default: every tag)
 */

/**
 * @param {string} dir
 * @param {number} rank
 * @param {number} size
 * @param {Faults} [faults]
 * @returns {Promise<import('../../dist/index.js').PointToPoint & { close(): void }>}
 */
export async function socketLayer(dir, rank, size, faults = {}) {
  mkdirSync(dir, { recursive: true });
  /** @type {Map<string, Uint8Array[]>} */
  const queues = new Map();
  /** @type {Map<string, ((m: Uint8Array) => void)[]>} */
  const waiting = new Map();
  /** @type {Map<number, Promise<net.Socket>>} */
  const outgoing = new Map();
  /** @type {net.Socket[]} */
  const sockets = [];
  const key = (/** @type {number} */ peer, /** @type {number} */ tag) => `${peer}/${tag}`;

  const deliver = (/** @type {number} */ peer, /** @type {number} */ tag, /** @type {Uint8Array} */ bytes) => {
    const w = waiting.get(key(peer, tag));
    if (w !== undefined && w.length > 0) return w.shift()(bytes);
    const q = queues.get(key(peer, tag)) ?? [];
    q.push(bytes);
    queues.set(key(peer, tag), q);
  };

  const server = net.createServer((socket) => {
    sockets.push(socket);
    let peer = -1;
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (peer < 0) {
        if (buffered.length < 4) return;
        peer = buffered.readUInt32LE(0);
        buffered = buffered.subarray(4);
      }
      while (buffered.length >= 8) {
        const tag = buffered.readUInt32LE(0);
        const length = buffered.readUInt32LE(4);
        if (buffered.length < 8 + length) break;
        deliver(peer, tag, new Uint8Array(buffered.subarray(8, 8 + length)));
        buffered = buffered.subarray(8 + length);
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise((resolve) => server.listen(join(dir, `rank-${rank}.sock`), () => resolve(undefined)));
  server.unref();

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
            sockets.push(s);
            resolve(s);
          });
          s.once('error', (e) => {
            if (Date.now() > deadline) reject(e);
            else setTimeout(attempt, 10);
          });
        };
        attempt();
      });
      outgoing.set(peer, c);
    }
    return c;
  };

  /** @type {Map<number, number>} */
  const sentOnTag = new Map();
  /** @type {Map<string, Promise<void>>} */
  const chains = new Map();
  const applies = (/** @type {number} */ tag) => faults.faultTag === undefined || faults.faultTag === tag;

  return {
    rank,
    size,
    async send(peer, tag, data) {
      if (!(data instanceof Uint8Array)) throw new TypeError('send: data must be a Uint8Array');
      const n = (sentOnTag.get(tag) ?? 0) + 1;
      sentOnTag.set(tag, n);
      if (applies(tag) && faults.rejectAfter !== undefined && n > faults.rejectAfter) throw new Error(`injected failure of send #${n} to rank ${peer}`);
      if (applies(tag) && faults.dropAfter !== undefined && n > faults.dropAfter) return;
      const frame = Buffer.alloc(8 + data.byteLength);
      frame.writeUInt32LE(tag, 0);
      frame.writeUInt32LE(data.byteLength, 4);
      frame.set(data, 8);
      const socket = await connect(peer);
      if (applies(tag) && faults.maxDelayMs !== undefined) {
        // Each message waits a random time after the previous one of its (peer, tag): one tag's
        // messages stay in order, different tags' overtake each other (the contract allows it).
        const k = key(peer, tag);
        const next = (chains.get(k) ?? Promise.resolve())
          .then(() => new Promise((r) => setTimeout(r, Math.random() * (faults.maxDelayMs ?? 0))))
          .then(() => {
            socket.write(frame);
          });
        chains.set(k, next);
        return next;
      }
      socket.write(frame);
    },
    recv(peer, tag, maxBytes) {
      const q = queues.get(key(peer, tag));
      const check = (/** @type {Uint8Array} */ m) => {
        if (m.byteLength > maxBytes) throw new Error(`a message of ${m.byteLength} bytes from rank ${peer} exceeds ${maxBytes}`);
        return m;
      };
      if (q !== undefined && q.length > 0) return Promise.resolve(check(q.shift()));
      return new Promise((resolve, reject) => {
        const w = waiting.get(key(peer, tag)) ?? [];
        w.push((m) => {
          try {
            resolve(check(m));
          } catch (e) {
            reject(e);
          }
        });
        waiting.set(key(peer, tag), w);
      });
    },
    close() {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}
