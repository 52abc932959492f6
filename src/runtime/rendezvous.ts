/**
 * Rendezvous: how the N processes of a job find each other (architecture §5).
 *
 * A small TCP key-value store, hosted by the launcher or by rank 0, protected by a per-job random
 * token. The protocol is newline-delimited JSON:
 *
 *   client → server, first line:  {"hello": <token>, "rank": <n>}
 *   server → client, on success:  {"ok":true,"hello":true}
 *   (a first line that is not exactly a hello with the right token — wrong token, garbage, binary
 *   junk, a line over 64 KiB, nothing within 5 s — makes the server close the connection without
 *   a reply and without touching any state)
 *
 *   then requests, which may be pipelined:
 *     {"id":k,"op":"put","key":s,"value":s}   a key is written once; the same value again is a no-op,
 *                                             a different value is an error naming the key
 *     {"id":k,"op":"get","key":s}             parked by the server until the key exists
 *     {"id":k,"op":"close"}                   the server answers, then ends the connection
 *   and replies {"id":k,"ok":true[,"value":s]} or {"id":k,"ok":false,"error":"..."}.
 *
 * Values are strings (callers JSON-encode). The server keeps the stored bytes bounded (256 MiB by
 * default) and does O(1) work per request besides the JSON; a get parked for a key costs one entry
 * until the key is put or the connection closes.
 *
 * A server that knows the job's size (`ranks`) also watches the job: a hello with a rank outside
 * 0..ranks−1, or for a rank already connected, is dropped like a wrong token; and a rank whose
 * connection ends without a `close` request (it died, or its init failed) makes the server put
 * ABORT_KEY = {"rank": r, "reason": s} itself, so every rank still in init learns it at once
 * (clients park a get on that key: `watchAbort`). A rank whose init fails puts the key first,
 * with its own reason (`abort`); the first put wins.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { TopocollError, isTopocollError } from '../errors.js';

/** Longest first (hello) line the server reads before closing the connection. */
const MAX_HELLO_LINE = 64 * 1024;
/** Longest request line after hello (a put carries its value on one line). */
const MAX_REQUEST_LINE = 64 * 1024 * 1024;
/** Longest reply line a client accepts (a get reply carries a value stored by a put). */
const MAX_REPLY_LINE = MAX_REQUEST_LINE + 64 * 1024;
/** Default bound on the bytes of keys and values the server stores. */
const DEFAULT_MAX_STORED_BYTES = 256 * 1024 * 1024;
/** Default time a new connection has to send a valid hello. */
const DEFAULT_HELLO_TIMEOUT_MS = 5000;
/** Retry delays while the server is not up yet: 10 ms doubling up to this. */
const MAX_RETRY_DELAY_MS = 250;
/** How long close() waits for the server to end the connection before dropping it. */
const CLOSE_GRACE_MS = 1000;
/** The server's answer to an accepted hello. */
const HELLO_ACK = '{"ok":true,"hello":true}';
/** Connection errors that mean "not up (yet)": retried until the deadline. */
const RETRYABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ETIMEDOUT']);

/** The key a failing rank (or the server, for a lost connection) puts to stop the job's init. */
export const ABORT_KEY = 'job/abort';

/** A fresh per-job token: 32 hex characters from 16 random bytes. */
export function createJobToken(): string {
  return randomBytes(16).toString('hex');
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

/** Splits a byte stream into lines (without the `\n`), refusing lines longer than `maxLine`. */
class LineReader {
  private parts: Buffer[] = [];
  private partsLength = 0;

  constructor(public maxLine: number) {}

  /**
   * Feeds `chunk`, calling `onLine` for each complete line; `onLine` returns false to stop (the
   * rest of the chunk is dropped). Returns false when a line exceeds `maxLine`.
   */
  push(chunk: Buffer, onLine: (line: Buffer) => boolean): boolean {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl === -1) break;
      const pieceLength = nl - start;
      if (this.partsLength + pieceLength > this.maxLine) return false;
      let line: Buffer;
      if (this.parts.length > 0) {
        this.parts.push(chunk.subarray(start, nl));
        line = Buffer.concat(this.parts, this.partsLength + pieceLength);
        this.parts = [];
        this.partsLength = 0;
      } else {
        line = chunk.subarray(start, nl);
      }
      start = nl + 1;
      if (!onLine(line)) return true;
    }
    const rest = chunk.length - start;
    if (rest > 0) {
      if (this.partsLength + rest > this.maxLine) return false;
      this.parts.push(chunk.subarray(start));
      this.partsLength += rest;
    }
    return true;
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Printable ASCII without spaces, 16–256 characters (createJobToken gives 32 hex digits). */
function validateToken(token: unknown, where: string): string {
  if (typeof token !== 'string' || !/^[\x21-\x7e]{16,256}$/.test(token)) {
    throw new TopocollError('ECONFIG', `${where}: the job token must be 16–256 printable ASCII characters without spaces`, {
      hint: 'Use createJobToken() (32 hex digits) and pass the same token to every rank.',
    });
  }
  return token;
}

function validateHost(host: unknown, where: string): string {
  if (typeof host !== 'string' || host.trim() === '' || /\s/.test(host)) {
    throw new TopocollError('ECONFIG', `${where}: bad rendezvous host ${JSON.stringify(host)}`);
  }
  return host;
}

function validatePort(port: unknown, min: number, where: string): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < min || port > 65535) {
    throw new TopocollError('ECONFIG', `${where}: bad rendezvous port ${String(port)} (expected an integer ${min}–65535)`);
  }
  return port;
}

function validateTimeout(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw new TopocollError('EINVAL', `${what}: timeout must be a positive number of milliseconds, got ${String(ms)}`);
  }
  return ms;
}

function validateKey(key: unknown, what: string): string {
  if (typeof key !== 'string' || key === '') {
    throw new TopocollError('EINVAL', `${what}: the key must be a non-empty string, got ${JSON.stringify(key)}`);
  }
  return key;
}

function errnoCode(e: unknown): string | undefined {
  return isPlainObject(e) && typeof e.code === 'string' ? e.code : undefined;
}

function formatBytes(n: number): string {
  return n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n} bytes`;
}

// ---------------------------------------------------------------------------------------------
// Server

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
      this.put(undefined, 0, ABORT_KEY, JSON.stringify({ rank, reason: 'its connection to the rendezvous ended before init completed (the process died or its init failed)' }));
    }
    if (this.acceptedRanks.size === this.options.ranks && this.connectedRanks.size === 0) this.options.onAllLeft?.();
  }
}

// ---------------------------------------------------------------------------------------------
// Client

export interface RendezvousClientOptions {
  host: string;
  port: number;
  token: string;
  /** This process's rank (sent in the hello). */
  rank: number;
  /** Deadline for connecting (the server may start later than this rank); default for get(). */
  timeoutMs: number;
}

interface Pending {
  resolve: (value: string) => void;
  reject: (e: TopocollError) => void;
  timer: NodeJS.Timeout | undefined;
  what: string;
}

/** Why a job's init was stopped (the value stored under ABORT_KEY). */
export interface JobAbort {
  rank: number;
  reason: string;
}

type ClientState = 'hello' | 'open' | 'closing' | 'closed' | 'lost';

export class RendezvousClient {
  private readonly socket: net.Socket;
  private readonly where: string;
  private readonly timeoutMs: number;
  private readonly reader = new LineReader(MAX_REPLY_LINE);
  private readonly pending = new Map<number, Pending>();
  private state: ClientState = 'hello';
  private nextId = 1;
  private corked = false;
  private lostReason = 'the connection closed';
  private hello: { resolve: () => void; reject: (e: TopocollError) => void; timer: NodeJS.Timeout } | undefined;
  private closed: Promise<void>;
  private abortWatched = false;
  private aborted: JobAbort | undefined;

  private constructor(socket: net.Socket, where: string, timeoutMs: number) {
    this.socket = socket;
    this.where = where;
    this.timeoutMs = timeoutMs;
    this.closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (e) => {
      this.lostReason = `the connection failed (${errnoCode(e) ?? e.message})`;
    });
    socket.on('close', () => this.onClose());
  }

  /**
   * Connects to the rendezvous at host:port and presents the token. Connection refused (the server
   * is not up yet) is retried until `timeoutMs`; then ETIMEDOUT naming host:port. A server that
   * closes the connection instead of accepting the hello is ECONFIG (wrong token or not a
   * rendezvous), or EPEERLOST when nothing accepts connections there any more (it died).
   */
  static async connect(options: RendezvousClientOptions): Promise<RendezvousClient> {
    if (!isPlainObject(options)) throw new TopocollError('EINVAL', 'rendezvous client: options must be an object');
    const host = validateHost(options.host, 'rendezvous client');
    const port = validatePort(options.port, 1, 'rendezvous client');
    const token = validateToken(options.token, 'rendezvous client');
    const rank = options.rank;
    if (typeof rank !== 'number' || !Number.isSafeInteger(rank) || rank < 0) {
      throw new TopocollError('EINVAL', `rendezvous client: rank must be a non-negative integer, got ${String(rank)}`);
    }
    const timeoutMs = validateTimeout(options.timeoutMs, 'rendezvous client');
    const where = `${host}:${port}`;
    const deadline = Date.now() + timeoutMs;
    let delay = 10;
    let lastError = 'no attempt';
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw new TopocollError('ETIMEDOUT', `could not reach the rendezvous at ${where} within ${timeoutMs} ms (last error: ${lastError})`, {
          rank,
          hint: 'Check that the launcher or rank 0 is running and that the address and port are right.',
        });
      }
      let socket: net.Socket;
      try {
        socket = await openSocket(host, port, remaining);
      } catch (e) {
        const code = errnoCode(e);
        if (code === 'ENOTFOUND') {
          throw new TopocollError('ECONFIG', `cannot resolve the rendezvous host '${host}'`, { rank, cause: e });
        }
        if (code === undefined || !RETRYABLE.has(code)) {
          throw new TopocollError('EPEERLOST', `cannot connect to the rendezvous at ${where}: ${code ?? String(e)}`, { rank, cause: e });
        }
        lastError = code;
        const wait = Math.min(delay, Math.max(0, deadline - Date.now()));
        await new Promise((resolve) => setTimeout(resolve, wait));
        delay = Math.min(delay * 2, MAX_RETRY_DELAY_MS);
        continue;
      }
      const client = new RendezvousClient(socket, where, timeoutMs);
      try {
        await client.handshake(token, rank, deadline, timeoutMs);
      } catch (e) {
        // A refused hello and a server that died as it read it look alike: a server that is
        // still there accepts a new connection (then the token is wrong), a dead one does not.
        if (isTopocollError(e) && e.code === 'ECONFIG' && !(await serverAnswers(host, port))) {
          throw new TopocollError('EPEERLOST', `the rendezvous at ${where} went away during the hello`, {
            rank,
            hint: 'The process hosting it (rank 0, or the launcher) has ended; its output says why.',
          });
        }
        throw e;
      }
      return client;
    }
  }

  /** The IPv4 address of this end of the connection (the interface that reaches the server). */
  get localAddress(): string {
    return ipv4(this.socket.localAddress);
  }

  /** The IPv4 address this client reached the server at. */
  get remoteAddress(): string {
    return ipv4(this.socket.remoteAddress);
  }

  /** Stores `value` under `key` (once: a different value for an existing key is EINVAL). */
  async put(key: string, value: string): Promise<void> {
    validateKey(key, 'rendezvous put');
    if (typeof value !== 'string') {
      return Promise.reject(new TopocollError('EINVAL', `rendezvous put of key '${key}': the value must be a string (JSON-encode it)`));
    }
    // The id goes last so that the (possibly large) rest is encoded once and its size checked.
    const rest = JSON.stringify({ op: 'put', key, value }).slice(1);
    if (Buffer.byteLength(rest, 'utf8') + 32 > MAX_REQUEST_LINE) {
      return Promise.reject(
        new TopocollError('EINVAL', `rendezvous put of key '${key}': the value is too large (at most ${formatBytes(MAX_REQUEST_LINE)} per put)`),
      );
    }
    await this.request((id) => `{"id":${id},${rest}`, `put of key '${key}'`, this.timeoutMs);
  }

  /** The value of `key`, waiting until some rank has put it (ETIMEDOUT after `timeoutMs`). */
  async get(key: string, timeoutMs?: number): Promise<string> {
    validateKey(key, 'rendezvous get');
    const ms = timeoutMs === undefined ? this.timeoutMs : validateTimeout(timeoutMs, `rendezvous get of key '${key}'`);
    const rest = JSON.stringify({ op: 'get', key }).slice(1);
    return this.request((id) => `{"id":${id},${rest}`, `key '${key}'`, ms);
  }

  /**
   * From now on, an abort of the job (ABORT_KEY put by a failing rank or by the server for a lost
   * rank) rejects every pending and later request with EPEERLOST naming that rank and its reason.
   */
  watchAbort(): void {
    if (this.state !== 'open' || this.abortWatched) return;
    this.abortWatched = true;
    const rest = JSON.stringify({ op: 'get', key: ABORT_KEY }).slice(1);
    this.request((id) => `{"id":${id},${rest}`, 'the job abort', Infinity).then(
      (value) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(value);
        } catch {
          parsed = undefined;
        }
        const rank = isPlainObject(parsed) && typeof parsed.rank === 'number' ? parsed.rank : -1;
        const reason = isPlainObject(parsed) && typeof parsed.reason === 'string' ? parsed.reason : 'no reason given';
        this.aborted = { rank, reason };
        this.failPending((p) => this.abortError(p.what));
      },
      () => undefined, // the connection closed: pending requests learn that themselves
    );
  }

  /** Stops the job's init on every rank: stores this rank's reason under ABORT_KEY (best effort). */
  async abort(rank: number, reason: string): Promise<void> {
    if (this.state !== 'open' || this.aborted !== undefined) return;
    await this.put(ABORT_KEY, JSON.stringify({ rank, reason: reason.slice(0, 4096) })).catch(() => undefined);
  }

  /** EPEERLOST when the job's init was aborted (see watchAbort) or the rendezvous is gone. */
  throwIfAborted(): void {
    if (this.aborted !== undefined) throw this.abortError('the other ranks');
    if (this.state === 'lost') throw new TopocollError('EPEERLOST', `rendezvous at ${this.where}: ${this.lostReason} while waiting for the other ranks`);
  }

  private abortError(what: string): TopocollError {
    const a = this.aborted!;
    return new TopocollError('EPEERLOST', `init stopped while waiting for ${what}: rank ${a.rank} failed: ${a.reason}`, {
      hint: a.rank >= 0 ? `The output of rank ${a.rank} says why.` : undefined,
    });
  }

  /** Says goodbye and closes the connection; requests still pending reject with ECLOSED. */
  async close(): Promise<void> {
    if (this.state === 'closed' || this.state === 'lost') return this.closed;
    if (this.state !== 'closing') {
      this.state = 'closing';
      this.failPending((p) => new TopocollError('ECLOSED', `rendezvous client closed while waiting for ${p.what}`));
      if (!this.socket.destroyed) {
        this.write(`{"id":${this.nextId++},"op":"close"}`);
        this.socket.end();
      }
      const timer = setTimeout(() => this.socket.destroy(), CLOSE_GRACE_MS);
      void this.closed.then(() => clearTimeout(timer));
    }
    return this.closed;
  }

  private handshake(token: string, rank: number, deadline: number, timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          this.hello = undefined;
          this.socket.destroy();
          reject(
            new TopocollError('ETIMEDOUT', `the rendezvous at ${this.where} did not accept the hello within ${timeoutMs} ms`, { rank }),
          );
        },
        Math.max(0, deadline - Date.now()),
      );
      this.hello = {
        resolve,
        reject: (e) => reject(new TopocollError(e.code, e.detail, { rank, hint: e.hint })),
        timer,
      };
      this.write(JSON.stringify({ hello: token, rank }));
    });
  }

  /** Sends one request; `timeoutMs` Infinity waits as long as the connection lives. */
  private request(encode: (id: number) => string, what: string, timeoutMs: number): Promise<string> {
    if (this.aborted !== undefined) return Promise.reject(this.abortError(what));
    if (this.state !== 'open') {
      const e =
        this.state === 'lost'
          ? new TopocollError('EPEERLOST', `rendezvous at ${this.where}: ${this.lostReason}; cannot request ${what}`)
          : new TopocollError('ECLOSED', `rendezvous client is closed; cannot request ${what}`);
      return Promise.reject(e);
    }
    const id = this.nextId++;
    return new Promise<string>((resolve, reject) => {
      const timer =
        timeoutMs === Infinity
          ? undefined
          : setTimeout(() => {
              this.pending.delete(id);
              reject(
                new TopocollError('ETIMEDOUT', `rendezvous at ${this.where}: ${what} not available after waiting ${timeoutMs} ms`, {
                  hint: 'A rank may not have started, may have died, or may be stuck before init.',
                }),
              );
            }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer, what });
      this.write(encode(id));
    });
  }

  /** Writes one line; lines written in the same tick (e.g. an allgather's gets) go out together. */
  private write(line: string): void {
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    this.socket.write(line + '\n');
  }

  private onData(chunk: Buffer): void {
    const ok = this.reader.push(chunk, (line) => this.onLine(line));
    if (!ok) this.protocolError('a reply line is too long');
  }

  private onLine(line: Buffer): boolean {
    if (this.state === 'hello') {
      const hello = this.hello;
      if (hello === undefined) return false;
      this.hello = undefined;
      clearTimeout(hello.timer);
      if (line.toString('utf8') !== HELLO_ACK) {
        this.socket.destroy();
        hello.reject(new TopocollError('ECONFIG', `${this.where} answered the hello with something else: it is not a topocoll rendezvous`));
        return false;
      }
      this.state = 'open';
      hello.resolve();
      return true;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(line.toString('utf8'));
    } catch {
      msg = undefined;
    }
    if (!isPlainObject(msg) || typeof msg.id !== 'number' || typeof msg.ok !== 'boolean') {
      this.protocolError('a malformed reply');
      return false;
    }
    const p = this.pending.get(msg.id);
    if (p === undefined) return true; // a request that timed out (or the close): nobody waits
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.ok) {
      p.resolve(typeof msg.value === 'string' ? msg.value : '');
    } else {
      const error = typeof msg.error === 'string' ? msg.error : 'unspecified error';
      p.reject(new TopocollError('EINVAL', `rendezvous at ${this.where} refused ${p.what}: ${error}`));
    }
    return true;
  }

  private protocolError(what: string): void {
    this.lostReason = `the server sent ${what}`;
    this.socket.destroy();
  }

  private onClose(): void {
    if (this.hello !== undefined) {
      const hello = this.hello;
      this.hello = undefined;
      clearTimeout(hello.timer);
      hello.reject(
        new TopocollError('ECONFIG', `the rendezvous at ${this.where} closed the connection instead of accepting the hello`, {
          hint: 'Check that every rank uses the job token of this job (or the server is shutting down).',
        }),
      );
    }
    const wasClosing = this.state === 'closing';
    this.state = wasClosing ? 'closed' : 'lost';
    this.failPending(
      (p) => new TopocollError('EPEERLOST', `rendezvous at ${this.where}: ${this.lostReason} while waiting for ${p.what}`),
    );
  }

  private failPending(error: (p: Pending) => TopocollError): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) {
      clearTimeout(p.timer);
      p.reject(error(p));
    }
  }
}

/** Whether something still accepts connections at host:port (within a second). */
async function serverAnswers(host: string, port: number): Promise<boolean> {
  try {
    const socket = await openSocket(host, port, 1000);
    socket.destroy();
    return true;
  } catch {
    return false;
  }
}

/** A socket address as dotted IPv4 (IPv4-mapped IPv6 unwrapped); loopback for anything else. */
function ipv4(address: string | undefined): string {
  const a = address ?? '127.0.0.1';
  const v4 = a.startsWith('::ffff:') ? a.slice(7) : a;
  return net.isIPv4(v4) ? v4 : '127.0.0.1';
}

/** One TCP connection attempt, bounded by `timeoutMs`; rejects with the socket error. */
function openSocket(host: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise<net.Socket>((resolve, reject) => {
    const socket = net.connect({ host, port, noDelay: true });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(Object.assign(new Error(`connect to ${host}:${port} timed out`), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    const onError = (e: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(e);
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', onError);
      resolve(socket);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Collectives over the store

function validateGroup(what: string, name: string, rank: number, size: number): void {
  validateKey(name, what);
  if (!Number.isSafeInteger(size) || size < 1) {
    throw new TopocollError('EINVAL', `${what} '${name}': size must be a positive integer, got ${String(size)}`);
  }
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= size) {
    throw new TopocollError('EINVAL', `${what} '${name}': rank ${String(rank)} is not in 0..${size - 1}`);
  }
}

/** Names the ranks whose gets timed out: `3, 7, 12 (and 40 more)`. */
function describeRanks(ranks: number[]): string {
  const shown = ranks.slice(0, 10).join(', ');
  return ranks.length > 10 ? `${shown} (and ${ranks.length - 10} more)` : shown;
}

/**
 * Rank 0's half of a gather: waits (all gets in flight at once) for `name/1` … `name/<size-1>`.
 * ETIMEDOUT names the ranks that never arrived.
 */
async function gatherAtRoot(
  what: string,
  client: RendezvousClient,
  name: string,
  size: number,
  own: string,
  remainingMs: number,
  timeoutMs: number,
): Promise<string[]> {
  const gets: Promise<string>[] = [Promise.resolve(own)];
  for (let r = 1; r < size; r++) gets.push(client.get(`${name}/${r}`, remainingMs));
  const settled = await Promise.allSettled(gets);
  const values: string[] = [];
  const missing: number[] = [];
  let other: unknown;
  settled.forEach((s, r) => {
    if (s.status === 'fulfilled') values.push(s.value);
    else if (isTopocollError(s.reason, 'ETIMEDOUT')) missing.push(r);
    else other ??= s.reason;
  });
  if (other !== undefined) throw other;
  if (missing.length > 0) {
    throw new TopocollError('ETIMEDOUT', `${what} '${name}': rank(s) ${describeRanks(missing)} of ${size} did not arrive within ${timeoutMs} ms`, {
      rank: 0,
      hint: 'Those ranks may not have started, may have died, or may be stuck elsewhere.',
    });
  }
  return values;
}

/** A non-root rank's wait for rank 0 to publish `key`; ETIMEDOUT says why it may not have. */
/** How much longer the other ranks wait for rank 0's result than rank 0 waits for them. */
const ROOT_FIRST_MS = 1000;

async function awaitRoot(
  what: string,
  client: RendezvousClient,
  name: string,
  key: string,
  rank: number,
  size: number,
  remainingMs: number,
  timeoutMs: number,
): Promise<string> {
  try {
    // Rank 0 gives up first: it knows which ranks are missing, and its abort reaches this get.
    return await client.get(key, remainingMs + ROOT_FIRST_MS);
  } catch (e) {
    if (!isTopocollError(e, 'ETIMEDOUT')) throw e;
    throw new TopocollError('ETIMEDOUT', `${what} '${name}': not all ${size} ranks arrived within ${timeoutMs} ms (rank 0 did not publish '${key}')`, {
      rank,
      cause: e,
      hint: "Rank 0's error names the missing ranks (unless rank 0 itself is the one missing).",
    });
  }
}

/**
 * Every rank puts `name/<rank>` = `value`; the result, indexed by rank, is identical on every rank.
 * Rank 0 gets all the values (concurrently) and puts them as one JSON array under `name/all`, which
 * the other ranks get: 3·size requests in all rather than size² (one get per rank per value), which
 * is what keeps a few thousand ranks fast. The individual keys `name/<rank>` remain readable.
 */
export async function allgather(
  client: RendezvousClient,
  name: string,
  rank: number,
  size: number,
  value: string,
  timeoutMs: number,
): Promise<string[]> {
  validateGroup('allgather', name, rank, size);
  validateTimeout(timeoutMs, `allgather '${name}'`);
  if (typeof value !== 'string') throw new TopocollError('EINVAL', `allgather '${name}': the value must be a string (JSON-encode it)`);
  const deadline = Date.now() + timeoutMs;
  await client.put(`${name}/${rank}`, value);
  if (size === 1) return [value];
  const remaining = Math.max(1, deadline - Date.now());
  if (rank === 0) {
    const values = await gatherAtRoot('allgather', client, name, size, value, remaining, timeoutMs);
    await client.put(`${name}/all`, JSON.stringify(values));
    return values;
  }
  const all = await awaitRoot('allgather', client, name, `${name}/all`, rank, size, remaining, timeoutMs);
  let values: unknown;
  try {
    values = JSON.parse(all);
  } catch {
    values = undefined;
  }
  if (!Array.isArray(values) || values.length !== size || !values.every((v) => typeof v === 'string') || values[rank] !== value) {
    throw new TopocollError('EINVAL', `allgather '${name}': '${name}/all' does not hold the ${size} values of this allgather`, {
      rank,
      hint: 'Use a fresh name for every allgather, and the same size on every rank.',
    });
  }
  return values as string[];
}

/**
 * Returns once all `size` ranks have entered the barrier `name`. Every rank puts `name/<rank>`;
 * rank 0 waits for all of them and puts `name/done`, which the others wait for — O(size) requests.
 */
export async function barrier(client: RendezvousClient, name: string, rank: number, size: number, timeoutMs: number): Promise<void> {
  validateGroup('barrier', name, rank, size);
  validateTimeout(timeoutMs, `barrier '${name}'`);
  if (size === 1) return;
  const deadline = Date.now() + timeoutMs;
  await client.put(`${name}/${rank}`, '');
  const remaining = Math.max(1, deadline - Date.now());
  if (rank === 0) {
    await gatherAtRoot('barrier', client, name, size, '', remaining, timeoutMs);
    await client.put(`${name}/done`, '');
  } else {
    await awaitRoot('barrier', client, name, `${name}/done`, rank, size, remaining, timeoutMs);
  }
}
