import { timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { TopocollError } from '../../errors.js';
import {
  LineReader,
  isPlainObject,
  validateToken,
  validateHost,
  validatePort,
  validateTimeout,
  errnoCode,
  formatBytes,
  MAX_REQUEST_LINE,
  HELLO_ACK,
  ABORT_KEY,
} from './protocol.js';

/**
 * The rendezvous server: the key-value store every rank of a job connects to (protocol.ts has
 * the wire format). Hosted by the launcher, or by rank 0 in a worker thread (host.ts).
 */

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Longest first (hello) line the server reads before closing the connection. */
const MAX_HELLO_LINE = 64 * 1024;
/** Default bound on the bytes of keys and values the server stores. */
const DEFAULT_MAX_STORED_BYTES = 256 * 1024 * 1024;
/** Default time a new connection has to send a valid hello. */
const DEFAULT_HELLO_TIMEOUT_MS = 5000;

export interface RendezvousServerOptions {
  /** The job token every client must present in its hello. */
  token: string;
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  /** Port; default 0 (any free port: read it from `address`). */
  port?: number;
  /** Bound on stored key + value bytes; default 256 MiB. Puts beyond it get an error reply. */
  maxStoredBytes?: number;
  /** Time a new connection has to send a valid hello; default 5000 ms. */
  helloTimeoutMs?: number;
  /** The job's size: hellos are checked against it and lost connections abort the job (see above). */
  ranks?: number;
  /** Called once, when every rank 0..ranks−1 has been accepted. */
  onAllConnected?: () => void;
  /** Called once, when every rank has been accepted and every one of their connections has ended. */
  onAllLeft?: () => void;
}

interface Conn {
  socket: net.Socket;
  reader: LineReader;
  authenticated: boolean;
  closed: boolean;
  corked: boolean;
  helloTimer: NodeJS.Timeout | undefined;
  /** Gets of this connection parked until their key is put. */
  parked: Set<Parked>;
  /** The rank of its accepted hello. */
  rank: number | undefined;
  /** It asked to close: its end is a goodbye, not a loss. */
  saidGoodbye: boolean;
}

interface Parked {
  conn: Conn;
  id: number;
  key: string;
}

export class RendezvousServer {
  /** Where clients reach this server (the port is the actual one when 0 was asked for). */
  readonly address: { host: string; port: number };

  private readonly server: net.Server;
  private readonly tokenBytes: Buffer;
  private readonly maxStoredBytes: number;
  private readonly helloTimeoutMs: number;
  private readonly options: RendezvousServerOptions;
  private readonly conns = new Set<Conn>();
  /** key → JSON-encoded value (encoded once, sent as is to every getter). */
  private readonly store = new Map<string, string>();
  private readonly waiters = new Map<string, Set<Parked>>();
  private storedBytes = 0;
  private closing: Promise<void> | undefined;
  /** With `ranks`: the ranks whose connection is open, and how many have ever been accepted. */
  private readonly connectedRanks = new Set<number>();
  private readonly acceptedRanks = new Set<number>();
  /** Ranks that closed their connection with a goodbye (they finished init). */
  private readonly goodbyes = new Set<number>();

  private constructor(server: net.Server, address: { host: string; port: number }, token: string, options: RendezvousServerOptions) {
    this.server = server;
    this.address = address;
    this.tokenBytes = Buffer.from(token, 'utf8');
    this.maxStoredBytes = options.maxStoredBytes ?? DEFAULT_MAX_STORED_BYTES;
    this.helloTimeoutMs = options.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS;
    this.options = options;
    server.on('connection', (socket) => this.accept(socket));
  }

  static async listen(options: RendezvousServerOptions): Promise<RendezvousServer> {
    const where = 'rendezvous server';
    if (!isPlainObject(options)) throw new TopocollError('EINVAL', `${where}: options must be an object`);
    const token = validateToken(options.token, where);
    const host = validateHost(options.host ?? '127.0.0.1', where);
    const port = validatePort(options.port ?? 0, 0, where);
    if (options.maxStoredBytes !== undefined && !(Number.isSafeInteger(options.maxStoredBytes) && options.maxStoredBytes > 0)) {
      throw new TopocollError('EINVAL', `${where}: maxStoredBytes must be a positive integer, got ${String(options.maxStoredBytes)}`);
    }
    if (options.helloTimeoutMs !== undefined) validateTimeout(options.helloTimeoutMs, `${where}: helloTimeoutMs`);
    if (options.ranks !== undefined && !(Number.isSafeInteger(options.ranks) && options.ranks > 0)) {
      throw new TopocollError('EINVAL', `${where}: ranks must be a positive integer, got ${String(options.ranks)}`);
    }

    const server = net.createServer({ noDelay: true });
    await new Promise<void>((resolve, reject) => {
      const onError = (e: Error): void => {
        reject(
          new TopocollError('ECONFIG', `${where}: cannot listen on ${host}:${port}: ${errnoCode(e) ?? e.message}`, {
            cause: e,
            hint: errnoCode(e) === 'EADDRINUSE' ? 'Choose another port, or 0 for any free port.' : undefined,
          }),
        );
      };
      server.once('error', onError);
      // A large backlog: a few thousand ranks may connect at once.
      server.listen({ host, port, backlog: 4096 }, () => {
        server.off('error', onError);
        resolve();
      });
    });
    const bound = server.address();
    const actualPort = typeof bound === 'object' && bound !== null ? bound.port : port;
    return new RendezvousServer(server, { host, port: actualPort }, token, options);
  }

  /** Stops listening and closes every client connection (parked gets see their connection drop). */
  close(): Promise<void> {
    if (this.closing === undefined) {
      this.closing = new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        for (const conn of this.conns) this.drop(conn);
      });
    }
    return this.closing;
  }

  private accept(socket: net.Socket): void {
    if (this.closing !== undefined) {
      socket.destroy();
      return;
    }
    const conn: Conn = {
      socket,
      reader: new LineReader(MAX_HELLO_LINE),
      authenticated: false,
      closed: false,
      corked: false,
      helloTimer: undefined,
      parked: new Set(),
      rank: undefined,
      saidGoodbye: false,
    };
    this.conns.add(conn);
    // The drop waits for the poll phase after the timer: when this thread was busy past the
    // deadline, timers run before the data that arrived meanwhile is read, and a hello that came
    // in time would otherwise be dropped with the silent connections.
    conn.helloTimer = setTimeout(() => setImmediate(() => conn.helloTimer !== undefined && this.drop(conn)), this.helloTimeoutMs);
    socket.on('data', (chunk: Buffer) => this.onData(conn, chunk));
    socket.on('error', () => this.drop(conn));
    socket.on('close', () => this.drop(conn));
    socket.on('drain', () => socket.resume());
  }

  private onData(conn: Conn, chunk: Buffer): void {
    if (conn.closed) return;
    const ok = conn.reader.push(chunk, (line) => (conn.authenticated ? this.onRequest(conn, line) : this.onHello(conn, line)));
    if (!ok) {
      this.drop(conn); // a line too long: before hello a stranger, after it a broken client
      return;
    }
    // A client that does not read its replies stops being read until it does.
    if (!conn.closed && conn.socket.writableNeedDrain) conn.socket.pause();
  }

  /** The first line: exactly {"hello": token, "rank": n}, or the connection is dropped silently. */
  private onHello(conn: Conn, line: Buffer): boolean {
    let msg: unknown;
    try {
      msg = JSON.parse(strictUtf8.decode(line));
    } catch {
      this.drop(conn);
      return false;
    }
    if (
      !isPlainObject(msg) ||
      Object.keys(msg).length !== 2 ||
      typeof msg.hello !== 'string' ||
      typeof msg.rank !== 'number' ||
      !Number.isSafeInteger(msg.rank) ||
      msg.rank < 0 ||
      !this.tokenMatches(msg.hello) ||
      (this.options.ranks !== undefined && (msg.rank >= this.options.ranks || this.connectedRanks.has(msg.rank)))
    ) {
      this.drop(conn);
      return false;
    }
    conn.rank = msg.rank;
    if (this.options.ranks !== undefined) {
      this.connectedRanks.add(msg.rank);
      this.acceptedRanks.add(msg.rank);
      if (this.acceptedRanks.size === this.options.ranks && this.connectedRanks.size === this.acceptedRanks.size) this.options.onAllConnected?.();
    }
    clearTimeout(conn.helloTimer);
    conn.helloTimer = undefined;
    conn.authenticated = true;
    conn.reader.maxLine = MAX_REQUEST_LINE;
    this.send(conn, HELLO_ACK);
    return true;
  }

  private tokenMatches(candidate: string): boolean {
    const bytes = Buffer.from(candidate, 'utf8');
    return bytes.length === this.tokenBytes.length && timingSafeEqual(bytes, this.tokenBytes);
  }

  private onRequest(conn: Conn, line: Buffer): boolean {
    let msg: unknown;
    try {
      msg = JSON.parse(line.toString('utf8'));
    } catch {
      msg = undefined;
    }
    // Without a usable id there is nobody to answer: a protocol violation ends the connection.
    if (!isPlainObject(msg) || typeof msg.id !== 'number' || !Number.isSafeInteger(msg.id)) {
      this.drop(conn);
      return false;
    }
    const id = msg.id;
    switch (msg.op) {
      case 'put': {
        const { key, value } = msg;
        if (typeof key !== 'string' || key === '' || typeof value !== 'string') {
          this.replyError(conn, id, 'put needs a non-empty string "key" and a string "value"');
        } else {
          this.put(conn, id, key, value);
        }
        return true;
      }
      case 'get': {
        const { key } = msg;
        if (typeof key !== 'string' || key === '') {
          this.replyError(conn, id, 'get needs a non-empty string "key"');
          return true;
        }
        const encoded = this.store.get(key);
        if (encoded !== undefined) {
          this.send(conn, `{"id":${id},"ok":true,"value":${encoded}}`);
        } else {
          const parked: Parked = { conn, id, key };
          let set = this.waiters.get(key);
          if (set === undefined) {
            set = new Set();
            this.waiters.set(key, set);
          }
          set.add(parked);
          conn.parked.add(parked);
        }
        return true;
      }
      case 'close':
        conn.saidGoodbye = true;
        this.send(conn, `{"id":${id},"ok":true}`);
        this.releaseParked(conn);
        conn.socket.end();
        return false;
      default:
        this.replyError(conn, id, `unknown op ${JSON.stringify(msg.op)} (expected put, get or close)`);
        return true;
    }
  }

  /** Stores a key for a client's request, or (conn undefined) for the server itself. */
  private put(conn: Conn | undefined, id: number, key: string, value: string): void {
    const encoded = JSON.stringify(value);
    const existing = this.store.get(key);
    if (existing !== undefined) {
      if (conn === undefined) return;
      if (existing === encoded || key === ABORT_KEY) this.send(conn, `{"id":${id},"ok":true}`);
      else this.replyError(conn, id, `key '${key}' is already set to a different value (a key can be written once)`);
      return;
    }
    const bytes = Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
    if (this.storedBytes + bytes > this.maxStoredBytes) {
      if (conn === undefined) return;
      this.replyError(
        conn,
        id,
        `put of key '${key}' (${bytes} bytes) would exceed the rendezvous store limit of ${formatBytes(this.maxStoredBytes)} (${this.storedBytes} bytes stored)`,
      );
      return;
    }
    this.store.set(key, encoded);
    this.storedBytes += bytes;
    if (conn !== undefined) this.send(conn, `{"id":${id},"ok":true}`);
    const set = this.waiters.get(key);
    if (set !== undefined) {
      this.waiters.delete(key);
      for (const parked of set) {
        parked.conn.parked.delete(parked);
        this.send(parked.conn, `{"id":${parked.id},"ok":true,"value":${encoded}}`);
      }
    }
  }

  private replyError(conn: Conn, id: number, error: string): void {
    this.send(conn, JSON.stringify({ id, ok: false, error }));
  }

  /** Writes one reply line; replies produced in the same tick go out in one write. */
  private send(conn: Conn, line: string): void {
    if (conn.closed) return;
    const socket = conn.socket;
    if (!conn.corked) {
      conn.corked = true;
      socket.cork();
      process.nextTick(() => {
        conn.corked = false;
        socket.uncork();
      });
    }
    socket.write(line + '\n');
  }

  private releaseParked(conn: Conn): void {
    for (const parked of conn.parked) {
      const set = this.waiters.get(parked.key);
      if (set !== undefined) {
        set.delete(parked);
        if (set.size === 0) this.waiters.delete(parked.key);
      }
    }
    conn.parked.clear();
  }

  /** Forgets a connection and destroys its socket (no reply). Idempotent. */
  private drop(conn: Conn): void {
    if (conn.closed) return;
    conn.closed = true;
    clearTimeout(conn.helloTimer);
    conn.helloTimer = undefined;
    this.releaseParked(conn);
    this.conns.delete(conn);
    conn.socket.destroy();
    if (conn.rank !== undefined && this.options.ranks !== undefined && this.closing === undefined) this.rankLeft(conn.rank, conn.saidGoodbye);
  }

  /**
   * The launcher saw `rank`'s process end: unless that rank finished init (said goodbye), the
   * job's init is aborted with `reason`, so the ranks waiting for it learn it at once.
   */
  rankExited(rank: number, reason: string): void {
    if (this.goodbyes.has(rank) || this.store.has(ABORT_KEY) || this.closing !== undefined) return;
    this.put(undefined, 0, ABORT_KEY, JSON.stringify({ rank, reason }));
  }

  private rankLeft(rank: number, goodbye: boolean): void {
    if (goodbye) this.goodbyes.add(rank);
    this.connectedRanks.delete(rank);
    if (!goodbye && !this.store.has(ABORT_KEY)) {
      this.put(
        undefined,
        0,
        ABORT_KEY,
        JSON.stringify({ rank, reason: 'its connection to the rendezvous ended before init completed (the process died or its init failed)' }),
      );
    }
    if (this.acceptedRanks.size === this.options.ranks && this.connectedRanks.size === 0) this.options.onAllLeft?.();
  }
}
