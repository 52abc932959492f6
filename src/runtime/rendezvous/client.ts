import net from 'node:net';
import { TopocollError, isTopocollError } from '../../errors.js';
import {
  LineReader,
  isPlainObject,
  validateToken,
  validateHost,
  validatePort,
  validateTimeout,
  validateKey,
  errnoCode,
  formatBytes,
  MAX_REQUEST_LINE,
  HELLO_ACK,
  ABORT_KEY,
  type JobAbort,
} from './protocol.js';

/** A rank's connection to the rendezvous server (protocol.ts has the wire format). */

/** Longest reply line a client accepts (a get reply carries a value stored by a put). */
const MAX_REPLY_LINE = MAX_REQUEST_LINE + 64 * 1024;
/** Retry delays while the server is not up yet: 10 ms doubling up to this. */
const MAX_RETRY_DELAY_MS = 250;
/** How long close() waits for the server to end the connection before dropping it. */
const CLOSE_GRACE_MS = 1000;
/** Connection errors that mean "not up (yet)": retried until the deadline. */
const RETRYABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ETIMEDOUT']);

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
          reject(new TopocollError('ETIMEDOUT', `the rendezvous at ${this.where} did not accept the hello within ${timeoutMs} ms`, { rank }));
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
    this.failPending((p) => new TopocollError('EPEERLOST', `rendezvous at ${this.where}: ${this.lostReason} while waiting for ${p.what}`));
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
