import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { TopocollError, type TopocollErrorCode } from '../../src/errors.js';
import { RendezvousClient } from '../../src/runtime/rendezvous/client.js';
import { allgather, barrier } from '../../src/runtime/rendezvous/collectives.js';
import { createJobToken } from '../../src/runtime/rendezvous/protocol.js';
import { RendezvousServer, type RendezvousServerOptions } from '../../src/runtime/rendezvous/server.js';

const HOST = '127.0.0.1';

const servers: RendezvousServer[] = [];
const clients: RendezvousClient[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function startServer(options: Partial<RendezvousServerOptions> = {}): Promise<{ server: RendezvousServer; token: string }> {
  const token = options.token ?? createJobToken();
  const server = await RendezvousServer.listen({ ...options, token });
  servers.push(server);
  return { server, token };
}

async function connect(server: RendezvousServer, token: string, rank = 0, timeoutMs = 5000): Promise<RendezvousClient> {
  const client = await RendezvousClient.connect({ ...server.address, token, rank, timeoutMs });
  clients.push(client);
  return client;
}

/** Awaits `p`, which must reject with a TopocollError of `code`, and returns the error. */
async function rejection(p: Promise<unknown>, code: TopocollErrorCode): Promise<TopocollError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(TopocollError);
    expect((e as TopocollError).code).toBe(code);
    return e as TopocollError;
  }
  throw new Error(`expected a TopocollError ${code}, but the promise resolved`);
}

/** A port nobody listens on (it was free a moment ago). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, HOST, resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * A raw TCP client that connects, writes `payload` (if any) and reports what the server sent back
 * and when the connection closed. Fails if the server keeps the connection open past `limitMs`.
 */
function stranger(port: number, payload: Buffer | string | undefined, limitMs = 3000): Promise<{ received: number; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let received = 0;
    const socket = net.connect({ host: HOST, port });
    sockets.push(socket);
    const timer = setTimeout(() => reject(new Error(`the server kept a stranger's connection open for ${limitMs} ms`)), limitMs);
    socket.on('connect', () => {
      if (payload !== undefined) socket.write(payload);
    });
    socket.on('data', (d: Buffer) => (received += d.length));
    socket.on('error', () => {}); // a reset is a close too
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ received, closedAfterMs: Date.now() - started });
    });
  });
}

/** Whether `p` is still pending after `ms`. */
async function stillPending(p: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol('pending');
  const winner = await Promise.race([
    p.then(
      () => 'settled',
      () => 'settled',
    ),
    new Promise((r) => setTimeout(() => r(marker), ms)),
  ]);
  return winner === marker;
}

function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j] as T, a[i] as T];
  }
  return a;
}

describe('createJobToken', () => {
  it('returns 32 fresh hex characters', () => {
    const a = createJobToken();
    const b = createJobToken();
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(b).toMatch(/^[0-9a-f]{32}$/);
    expect(a).not.toBe(b);
  });
});

describe('RendezvousServer / RendezvousClient', () => {
  it('listens on 127.0.0.1 and an actual port by default', async () => {
    const { server } = await startServer();
    expect(server.address.host).toBe(HOST);
    expect(server.address.port).toBeGreaterThan(0);
  });

  it('round-trips put and get, between clients too, for values that need escaping', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const b = await connect(server, token, 1);
    const value = JSON.stringify({ host: 'n1', text: 'line1\nline2 "quoted" é ✓ \u0000' });
    await a.put('init/info/0', value);
    expect(await a.get('init/info/0')).toBe(value);
    expect(await b.get('init/info/0')).toBe(value);
    await b.put('empty', '');
    expect(await a.get('empty')).toBe('');
  });

  it('parks a get until the key is put', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const b = await connect(server, token, 1);
    const got = a.get('late');
    expect(await stillPending(got, 100)).toBe(true);
    await b.put('late', 'here');
    expect(await got).toBe('here');
  });

  it('matches pipelined replies to their requests', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const b = await connect(server, token, 1);
    const n = 300;
    const gets = Array.from({ length: n }, (_, i) => a.get(`k/${i}`));
    await Promise.all(shuffle(Array.from({ length: n }, (_, i) => i)).map((i) => b.put(`k/${i}`, `v${i}`)));
    expect(await Promise.all(gets)).toEqual(Array.from({ length: n }, (_, i) => `v${i}`));
  });

  it('accepts the same value again but refuses a different one, naming the key', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const b = await connect(server, token, 1);
    await a.put('init/info/3', 'one');
    await b.put('init/info/3', 'one');
    const e = await rejection(b.put('init/info/3', 'two'), 'EINVAL');
    expect(e.message).toContain('init/info/3');
    expect(await a.get('init/info/3')).toBe('one');
    // The connection stays usable after an error reply.
    await b.put('other', 'x');
    expect(await a.get('other')).toBe('x');
  });

  it('bounds the stored bytes and refuses a put beyond the bound', async () => {
    const { server, token } = await startServer({ maxStoredBytes: 100 });
    const a = await connect(server, token, 0);
    await a.put('k1', 'x'.repeat(50));
    const e = await rejection(a.put('k2', 'y'.repeat(60)), 'EINVAL');
    expect(e.message).toContain('k2');
    expect(e.message).toMatch(/limit/);
    await rejection(a.get('k2', 100), 'ETIMEDOUT');
    await a.put('k3', 'z'.repeat(40));
    expect(await a.get('k3')).toBe('z'.repeat(40));
  });

  it('times a get out with ETIMEDOUT naming the key and the wait', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const t0 = Date.now();
    const e = await rejection(a.get('init/info/7', 150), 'ETIMEDOUT');
    const elapsed = Date.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(140);
    expect(elapsed).toBeLessThan(2000);
    expect(e.message).toContain('init/info/7');
    expect(e.message).toContain('150 ms');
    // A late put after the timeout does not confuse the connection.
    await a.put('init/info/7', 'v');
    expect(await a.get('init/info/7')).toBe('v');
  });

  it('uses the connect timeout as the default get timeout', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0, 200);
    const t0 = Date.now();
    const e = await rejection(a.get('never'), 'ETIMEDOUT');
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(e.message).toContain('200 ms');
  });

  it('rejects parked gets with EPEERLOST when the server closes, and later requests too', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const parked = rejection(a.get('init/info/1', 10_000), 'EPEERLOST');
    const parked2 = rejection(a.get('init/info/2', 10_000), 'EPEERLOST');
    expect(await stillPending(parked, 50)).toBe(true);
    const t0 = Date.now();
    await server.close();
    const e = await parked;
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(e.message).toContain('init/info/1');
    expect((await parked2).message).toContain('init/info/2');
    await rejection(a.put('x', 'y'), 'EPEERLOST');
  });

  it('close() rejects its pending gets with ECLOSED and the server keeps serving others', async () => {
    const { server, token } = await startServer();
    const a = await connect(server, token, 0);
    const b = await connect(server, token, 1);
    const pending = rejection(a.get('k', 10_000), 'ECLOSED');
    await a.close();
    await pending;
    await rejection(a.get('k'), 'ECLOSED');
    await b.put('k', 'v');
    expect(await b.get('k')).toBe('v');
    const c = await connect(server, token, 2);
    expect(await c.get('k')).toBe('v');
  });

  it('connects before the server listens, retrying until it is up', async () => {
    const port = await freePort();
    const token = createJobToken();
    const t0 = Date.now();
    const connecting = RendezvousClient.connect({ host: HOST, port, token, rank: 3, timeoutMs: 5000 });
    setTimeout(() => {
      void RendezvousServer.listen({ token, host: HOST, port }).then((s) => servers.push(s));
    }, 200);
    const client = await connecting;
    clients.push(client);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    await client.put('a', 'b');
    expect(await client.get('a')).toBe('b');
  });

  it('gives up on a dead port with ETIMEDOUT naming host:port within the deadline', async () => {
    const port = await freePort();
    const t0 = Date.now();
    const e = await rejection(RendezvousClient.connect({ host: HOST, port, token: createJobToken(), rank: 0, timeoutMs: 300 }), 'ETIMEDOUT');
    const elapsed = Date.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(1000);
    expect(e.message).toContain(`${HOST}:${port}`);
    expect(e.message).toContain('ECONNREFUSED');
  });

  it('refuses a client with the wrong token with ECONFIG', async () => {
    const { server } = await startServer();
    const e = await rejection(RendezvousClient.connect({ ...server.address, token: createJobToken(), rank: 0, timeoutMs: 2000 }), 'ECONFIG');
    expect(e.message).toMatch(/token/);
  });

  it('validates its arguments', async () => {
    const token = createJobToken();
    await rejection(RendezvousServer.listen({ token: 'short' }), 'ECONFIG');
    await rejection(RendezvousServer.listen({ token, port: 70000 }), 'ECONFIG');
    await rejection(RendezvousServer.listen({ token, host: '' }), 'ECONFIG');
    const { server } = await startServer({ token });
    await rejection(RendezvousServer.listen({ token, port: server.address.port }), 'ECONFIG'); // in use
    const base = { ...server.address, token, rank: 0, timeoutMs: 1000 };
    await rejection(RendezvousClient.connect({ ...base, port: 0 }), 'ECONFIG');
    await rejection(RendezvousClient.connect({ ...base, token: 'has space in it, sixteen+' }), 'ECONFIG');
    await rejection(RendezvousClient.connect({ ...base, rank: -1 }), 'EINVAL');
    await rejection(RendezvousClient.connect({ ...base, timeoutMs: 0 }), 'EINVAL');
    const c = await connect(server, token);
    await rejection(c.get(''), 'EINVAL');
    await rejection(c.get('k', -5), 'EINVAL');
    await rejection(c.put('k', 5 as unknown as string), 'EINVAL');
    await rejection(allgather(c, 'g', 4, 4, 'v', 1000), 'EINVAL');
    await rejection(allgather(c, 'g', 0, 0, 'v', 1000), 'EINVAL');
    await rejection(barrier(c, 'b', 0, 1.5, 1000), 'EINVAL');
  });
});

describe('strangers', () => {
  /** Each of these first lines must get the connection closed without a reply. */
  const badFirstLines: Array<[string, (token: string) => Buffer | string]> = [
    ['a wrong token', () => `${JSON.stringify({ hello: createJobToken(), rank: 0 })}\n`],
    ['an HTTP request', () => 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['binary junk', () => Buffer.concat([Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3]), Buffer.from('\n')])],
    ['the token with extra fields', (t) => `${JSON.stringify({ hello: t, rank: 0, op: 'put' })}\n`],
    ['the token without a rank', (t) => `${JSON.stringify({ hello: t })}\n`],
    ['the token with a bad rank', (t) => `${JSON.stringify({ hello: t, rank: -1 })}\n`],
    ['the token as an array', (t) => `${JSON.stringify([t, 0])}\n`],
    ['the token in invalid UTF-8', (t) => Buffer.concat([Buffer.from(`{"hello":"${t}`), Buffer.from([0xff]), Buffer.from('","rank":0}\n')])],
    // Valid hellos with the right token but for their length (JSON allows the padding whitespace).
    ['a right hello padded over 64 KiB', (t) => `{"hello":"${t}",${' '.repeat(65 * 1024)}"rank":0}\n`],
    ['a right hello after 64 KiB of whitespace', (t) => `${' '.repeat(65 * 1024)}{"hello":"${t}","rank":0}\n`],
  ];

  for (const [what, payload] of badFirstLines) {
    it(`closes a connection whose first line is ${what}, without a reply or a state change`, async () => {
      const { server, token } = await startServer();
      // The stranger follows its bad hello with requests that would change the store.
      const evil = `{"id":1,"op":"put","key":"x","value":"evil"}\n{"id":2,"op":"get","key":"y"}\n`;
      const first = payload(token);
      const bytes = typeof first === 'string' ? Buffer.from(first) : first;
      const r = await stranger(server.address.port, Buffer.concat([bytes, Buffer.from(evil)]));
      expect(r.received).toBe(0);
      expect(r.closedAfterMs).toBeLessThan(2000);
      const a = await connect(server, token, 0);
      await rejection(a.get('x', 100), 'ETIMEDOUT');
      await a.put('x', 'good');
      await a.put('y', 'fine');
      expect(await a.get('x')).toBe('good');
    });
  }

  it('closes a connection that sends over 64 KiB without a newline at once, not at the hello timeout', async () => {
    const { server, token } = await startServer({ helloTimeoutMs: 10_000 });
    const r = await stranger(server.address.port, ' '.repeat(65 * 1024));
    expect(r.received).toBe(0);
    expect(r.closedAfterMs).toBeLessThan(2000);
    const a = await connect(server, token, 0);
    await a.put('k', 'v');
    expect(await a.get('k')).toBe('v');
  });

  it('accepts a right hello just under 64 KiB', async () => {
    const { server, token } = await startServer();
    const hello = `{"hello":"${token}","rank":0}`;
    const line = `${' '.repeat(64 * 1024 - hello.length - 1)}${hello}\n`;
    const received = await new Promise<string>((resolve, reject) => {
      const socket = net.connect({ host: HOST, port: server.address.port });
      sockets.push(socket);
      socket.on('error', reject);
      socket.on('close', () => reject(new Error('the server closed the connection')));
      socket.on('connect', () => socket.write(line));
      socket.once('data', (d: Buffer) => resolve(d.toString()));
    });
    expect(received).toBe('{"ok":true,"hello":true}\n');
  });

  it('closes a silent connection after the hello timeout and keeps serving meanwhile', async () => {
    const { server, token } = await startServer({ helloTimeoutMs: 300 });
    const silent = stranger(server.address.port, undefined);
    const partial = stranger(server.address.port, `{"hello":"${token}","rank":0}`); // no newline
    const a = await connect(server, token, 0);
    await a.put('k', 'v');
    expect(await a.get('k')).toBe('v');
    for (const r of [await silent, await partial]) {
      expect(r.received).toBe(0);
      expect(r.closedAfterMs).toBeGreaterThanOrEqual(280);
      expect(r.closedAfterMs).toBeLessThan(2000);
    }
    // The authenticated client is not subject to the hello timeout.
    expect(await a.get('k')).toBe('v');
  });

  it('keeps a connection that said hello open past the hello timeout', async () => {
    const { server, token } = await startServer({ helloTimeoutMs: 100 });
    const a = await connect(server, token, 0);
    await new Promise((r) => setTimeout(r, 250));
    await a.put('k', 'v');
    expect(await a.get('k')).toBe('v');
  });
});

describe('allgather and barrier', () => {
  it('gives 8 clients started concurrently in random order identical ordered arrays', async () => {
    const { server, token } = await startServer();
    const size = 8;
    const order = shuffle(Array.from({ length: size }, (_, r) => r));
    const results = await Promise.all(
      order.map(async (rank, i) => {
        await new Promise((r) => setTimeout(r, i * 5 + Math.random() * 20));
        const c = await connect(server, token, rank);
        return { rank, values: await allgather(c, 'init/info', rank, size, JSON.stringify({ rank, host: `h${rank % 3}` }), 5000) };
      }),
    );
    const expected = Array.from({ length: size }, (_, r) => JSON.stringify({ rank: r, host: `h${r % 3}` }));
    expect(results.map((r) => r.rank).sort()).toEqual(order.slice().sort());
    for (const r of results) expect(r.values).toEqual(expected);
  });

  it('names the ranks that never arrived when an allgather times out', async () => {
    const { server, token } = await startServer();
    const size = 4;
    const [c0, c2] = await Promise.all([connect(server, token, 0), connect(server, token, 2)]);
    const t0 = Date.now();
    const [e0, e2] = await Promise.all([
      rejection(allgather(c0, 'g', 0, size, 'v0', 200), 'ETIMEDOUT'),
      rejection(allgather(c2, 'g', 2, size, 'v2', 200), 'ETIMEDOUT'),
    ]);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(e0.message).toContain("allgather 'g': rank(s) 1, 3 of 4 did not arrive within 200 ms");
    expect(e2.message).toContain("allgather 'g'");
    expect(e2.message).toContain("rank 0 did not publish 'g/all'");
  });

  it('times an allgather out on every rank when rank 0 is missing', async () => {
    const { server, token } = await startServer();
    const cs = await Promise.all([1, 2].map((r) => connect(server, token, r)));
    const errors = await Promise.all(cs.map((c, i) => rejection(allgather(c, 'g', i + 1, 3, 'v', 150), 'ETIMEDOUT')));
    for (const e of errors) expect(e.message).toContain('did not publish');
  });

  it('leaves every value readable under name/<rank> and refuses a reused name with other values', async () => {
    const { server, token } = await startServer();
    const cs = await Promise.all([0, 1, 2].map((r) => connect(server, token, r)));
    const first = await Promise.all(cs.map((c, r) => allgather(c, 'init/host', r, 3, `h${r}`, 5000)));
    expect(first).toEqual([
      ['h0', 'h1', 'h2'],
      ['h0', 'h1', 'h2'],
      ['h0', 'h1', 'h2'],
    ]);
    const other = await connect(server, token, 9);
    expect(await other.get('init/host/1')).toBe('h1');
    expect(JSON.parse(await other.get('init/host/all'))).toEqual(['h0', 'h1', 'h2']);
    // A one-rank allgather needs nobody else.
    expect(await allgather(other, 'solo', 0, 1, 'x', 1000)).toEqual(['x']);
    // The same name again with a different value: the key is already set.
    await rejection(allgather(cs[1] as RendezvousClient, 'init/host', 1, 3, 'changed', 1000), 'EINVAL');
  });

  it('releases a barrier only when every rank has entered', async () => {
    const { server, token } = await startServer();
    const size = 5;
    const cs = await Promise.all(Array.from({ length: size }, (_, r) => connect(server, token, r)));
    const early = [0, 1, 2, 3].map((r) => barrier(cs[r] as RendezvousClient, 'sync', r, size, 5000));
    expect(await stillPending(Promise.race(early), 150)).toBe(true);
    await barrier(cs[4] as RendezvousClient, 'sync', 4, size, 5000);
    await Promise.all(early);
    // A second barrier with another name works on the same connections.
    await Promise.all(cs.map((c, r) => barrier(c, 'sync2', r, size, 5000)));
  });

  it('times a barrier out when a rank is missing', async () => {
    const { server, token } = await startServer();
    const size = 3;
    const cs = await Promise.all([0, 1].map((r) => connect(server, token, r)));
    const [e0, e1] = await Promise.all(cs.map((c, r) => rejection(barrier(c, 'b', r, size, 200), 'ETIMEDOUT')));
    expect(e0?.message).toContain('rank(s) 2 of 3');
    expect(e1?.message).toContain("barrier 'b'");
  });

  it('keeps a hello that arrived in time when its thread was busy past the hello deadline', async () => {
    const { server, token } = await startServer({ helloTimeoutMs: 50 });
    const { connect: raw } = await import('node:net');
    const socket = raw(server.address.port, server.address.host);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(JSON.stringify({ hello: token, rank: 0 }) + '\n');
    // The hello is in the server's socket buffer (written at once on loopback) and this thread,
    // the server's too, is busy until the deadline has passed.
    const until = Date.now() + 200;
    while (Date.now() < until);
    const reply = await new Promise<string>((resolve) => {
      let got = '';
      socket.on('data', (d) => (got += d));
      socket.on('close', () => resolve(got));
      setTimeout(() => resolve(got), 500);
    });
    socket.destroy();
    expect(reply).toContain('"hello":true');
  });

  it('serves a few hundred clients at once', async () => {
    const { server, token } = await startServer();
    const size = 300;
    const cs = await Promise.all(Array.from({ length: size }, (_, r) => connect(server, token, r, 20_000)));
    const t0 = Date.now();
    await Promise.all(cs.map((c, r) => barrier(c, 'start', r, size, 20_000)));
    const results = await Promise.all(cs.map((c, r) => allgather(c, 'big', r, size, `v${r}`, 20_000)));
    const expected = Array.from({ length: size }, (_, r) => `v${r}`);
    for (const values of results) expect(values).toEqual(expected);
    expect(Date.now() - t0).toBeLessThan(15_000);
  });
});
