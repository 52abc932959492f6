import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, repoRoot } from '../helpers/jobs.js';

/**
 * A stranger floods every rank's TCP data port during init: more silent connections than a
 * rank greets at once (native/src/transport/tcp_links.cc: 256, each with a 2 s greeting deadline),
 * plus a few that send garbage. The job (test/jobs/flood-check.mjs, 4 ranks on 2 emulated nodes)
 * must still link, compute the right results, exit 0 in bounded time and leave /dev/shm clean.
 *
 * The ranks open their data ports only once every rank has joined the rendezvous, and link a
 * few milliseconds later; to flood them while they wait, rank 2 (the first of the second node,
 * which links to rank 0) holds its init for 2 s once its port listens: before publishing its
 * port (the flood queues up in rank 0's listen backlog, in front of rank 2's connection) or
 * after (rank 0 sits in its accept loop taking in the flood). The test finds the ranks'
 * listening sockets in /proc (the launcher's children, their socket fds, /proc/<pid>/net/tcp);
 * the launcher's rendezvous port is the launcher's own, not a rank's.
 */
const RANKS = 4;
const HELD = 2;
// The rank the held one links to: in this job's plan the node leaders, ranks 0 and 2, are the
// only ranks linked over TCP (rank 2 connects, rank 0 accepts).
const ACCEPTOR = 0;
const HOLD_MS = 2000;
const SILENT = 300;
// Garbage of each kind, half before the silent connections (accepted at once) and half after.
const GARBAGE = 10;
const KINDS_OF_GARBAGE = 4;
// The bytes a rank's greeting has (tcp_links.h Hello: a 32-byte token and an int32 rank).
const HELLO_BYTES = 36;

type Kind = 'silent' | 'short-garbage' | 'long-garbage' | 'fake-hello' | 'garbage-then-end';

interface FloodConnection {
  kind: Kind;
  socket: net.Socket;
  /** When the connection was established (Date.now()), if it was. */
  connectedAt?: number;
  /** When the rank closed it (its end of stream or a reset arrived). */
  closedByRankAt?: number;
  error?: string;
}

interface DataPort {
  rank: number;
  pid: number;
  port: number;
  foundAt: number;
  connections: FloodConnection[];
}

/** Inodes of the sockets process `pid` holds open. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return inodes; // exited
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/**
 * The IPv4 TCP ports process `pid` listens on at one address. A rank's point-to-point messages
 * listen on every interface (0.0.0.0, docs/architecture.md §3.11) and are left out: the data port
 * is the one bound to the address the rank published.
 */
function listeningPorts(pid: number): number[] {
  const inodes = socketInodes(pid);
  if (inodes.size === 0) return [];
  let table = '';
  try {
    table = readFileSync(`/proc/${pid}/net/tcp`, 'utf8');
  } catch {
    return [];
  }
  const ports: number[] = [];
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    const [address, port] = f[1]?.split(':') ?? [];
    if (f[3] === '0A' && inodes.has(f[9]!) && address !== '00000000') ports.push(parseInt(port!, 16));
  }
  return ports;
}

/** The children of `pid` that run a rank of the launcher (their TOPOCOLL_RANK, once they have exec'd). */
function rankPids(pid: number): Map<number, number> {
  const ranks = new Map<number, number>();
  let children: string[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      children.push(
        ...readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8')
          .split(/\s+/)
          .filter((s) => s !== ''),
      );
    }
  } catch {
    children = [];
  }
  for (const child of children.map(Number)) {
    try {
      const m = /(?:^|\0)TOPOCOLL_RANK=(\d+)\0/.exec(readFileSync(`/proc/${child}/environ`, 'utf8'));
      if (m) ranks.set(Number(m[1]), child);
    } catch {
      // exited, or not yet exec'd
    }
  }
  return ranks;
}

function garbage(n: number): Buffer {
  return Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + 11) & 0xff));
}

/** Opens one connection of `kind` to 127.0.0.1:port; it stays open until the rank closes it or the test ends. */
function connectOne(port: number, kind: Kind): FloodConnection {
  const socket = net.connect({ host: '127.0.0.1', port });
  const c: FloodConnection = { kind, socket };
  socket.on('connect', () => {
    c.connectedAt = Date.now();
    if (kind === 'short-garbage') socket.write(garbage(HELLO_BYTES / 2)); // never completes a greeting
    if (kind === 'long-garbage') socket.write(garbage(4 * HELLO_BYTES));
    if (kind === 'fake-hello') {
      // A well-formed greeting from the held rank, without the job's token.
      const hello = Buffer.alloc(HELLO_BYTES);
      hello.writeInt32LE(HELD, 32);
      socket.write(hello);
    }
    if (kind === 'garbage-then-end') socket.end(garbage(5));
  });
  socket.on('data', () => undefined);
  socket.on('end', () => (c.closedByRankAt ??= Date.now()));
  socket.on('error', (e) => {
    c.error = e.message;
    c.closedByRankAt ??= Date.now();
  });
  return c;
}

function flood(port: number): FloodConnection[] {
  const kinds: Kind[] = ['long-garbage', 'fake-hello', 'short-garbage', 'garbage-then-end'];
  const half = (): Kind[] => kinds.flatMap((k) => Array.from({ length: GARBAGE / 2 }, () => k));
  return [...half(), ...Array.from({ length: SILENT }, (): Kind => 'silent'), ...half()].map((kind) => connectOne(port, kind));
}

type HoldAt = 'publish' | 'link';

interface FloodRun {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  seconds: number;
  ports: DataPort[];
  rendezvousPorts: number[];
  /** Ranks that listened on more than one port (a data port is one per rank). */
  extraPorts: string[];
}

/** Starts the job, floods every data port as it appears, and returns once the launcher has exited. */
async function runFlooded(holdAt: HoldAt): Promise<FloodRun> {
  const started = Date.now();
  const child = spawn(
    process.execPath,
    [`${repoRoot}dist/cli/main.js`, 'run', '-n', String(RANKS), '--nodes', '2', '--timeout', '20', jobScript('flood-check.mjs')],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FLOOD_HOLD_RANK: String(HELD), FLOOD_HOLD_MS: String(HOLD_MS), FLOOD_HOLD_AT: holdAt },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (status, signal) => resolve({ status, signal })),
  );
  let running = true;
  void exited.then(() => (running = false));
  // A hung job is stopped here (the launcher forwards SIGTERM to the ranks), and fails on its exit status and time.
  const watchdog = setTimeout(() => child.kill('SIGTERM'), 45_000);

  const ports: DataPort[] = [];
  const rendezvousPorts = new Set<number>();
  const extraPorts: string[] = [];
  const pids = new Map<number, number>();
  let ended: { status: number | null; signal: NodeJS.Signals | null };
  try {
    // Each rank listens on one data port; once all are found (and flooded) the polling stops.
    while (running && ports.length < RANKS) {
      if (pids.size < RANKS) for (const [rank, pid] of rankPids(child.pid!)) pids.set(rank, pid);
      for (const [rank, pid] of pids) {
        if (ports.some((p) => p.rank === rank)) continue;
        const found = listeningPorts(pid);
        if (found.length === 0) continue;
        if (found.length > 1) extraPorts.push(`rank ${rank}: ${found.join(', ')}`);
        ports.push({ rank, pid, port: found[0]!, foundAt: Date.now(), connections: flood(found[0]!) });
      }
      for (const p of listeningPorts(child.pid!)) rendezvousPorts.add(p);
      await new Promise((r) => setTimeout(r, 2));
    }
    ended = await exited;
  } finally {
    clearTimeout(watchdog);
    if (running) child.kill('SIGTERM');
    for (const p of ports) for (const c of p.connections) c.socket.destroy();
  }
  const seconds = (Date.now() - started) / 1000;
  return { ...ended, stdout, stderr, seconds, ports: ports.sort((a, b) => a.rank - b.rank), rendezvousPorts: [...rendezvousPorts], extraPorts };
}

function report(holdAt: HoldAt, r: FloodRun, initDone: Map<number, number>, holdEnd: number): void {
  const lines = [
    `hold at ${holdAt}: the job took ${r.seconds.toFixed(1)} s; rank ${ACCEPTOR} was done ${(initDone.get(ACCEPTOR) ?? NaN) - holdEnd} ms after the hold ended`,
  ];
  for (const p of r.ports) {
    const done = initDone.get(p.rank) ?? NaN;
    const connected = p.connections.filter((c) => c.connectedAt !== undefined).map((c) => c.connectedAt!);
    const dropped = p.connections.filter((c) => c.closedByRankAt !== undefined && c.closedByRankAt < done);
    lines.push(
      `  rank ${p.rank} port ${p.port}: found ${done - p.foundAt} ms before its init was done; ${connected.length}/${p.connections.length} connected, ` +
        `the last ${done - Math.max(...connected)} ms before; ${dropped.length} dropped by the rank during init (${[...new Set(dropped.map((c) => c.kind))].join(', ') || 'none'})`,
    );
  }
  console.log(lines.join('\n'));
}

describe('a stranger floods the TCP data ports during init', () => {
  for (const [holdAt, what] of [
    ['publish', 'the flood queues up in front of the real connection'],
    ['link', 'the waiting rank takes in the flood'],
  ] as const) {
    it(`${SILENT} silent and ${KINDS_OF_GARBAGE * GARBAGE} garbage connections to every data port, rank ${HELD} held at ${holdAt} (${what}): the job links, computes, exits 0, cleans up`, async () => {
      const r = await runFlooded(holdAt);
      const all = `${r.stdout}\n${r.stderr}`;
      const initDone = new Map([...r.stdout.matchAll(/^rank (\d+) init done at (\d+)$/gm)].map((m) => [Number(m[1]), Number(m[2])]));
      const held = /^rank (\d+) held init (\d+) ms at (\w+) with port (\d+) listening, until (\d+)$/m.exec(r.stdout);
      const holdEnd = Number(held?.[5]);
      report(holdAt, r, initDone, holdEnd);

      // The job: linked despite the flood, right results, no hang, nothing left behind.
      expect(r.signal, all).toBeNull();
      expect(r.status, all).toBe(0);
      for (let rank = 0; rank < RANKS; rank++) {
        expect(r.stdout, all).toContain(`rank ${rank} ok: allreduce ${(RANKS * (RANKS + 1)) / 2}, bcast ok`);
      }
      expect(r.seconds).toBeLessThan(30);
      expect(await leftoverSegments()).toEqual([]);

      // The flood happened, and during init. Every rank's data port was found (one per rank, none
      // of them the launcher's rendezvous port), and the held rank held where it was asked, with
      // the port the test flooded.
      expect(r.ports.map((p) => p.rank)).toEqual([0, 1, 2, 3]);
      expect(r.extraPorts).toEqual([]);
      expect(r.rendezvousPorts.length).toBeGreaterThan(0);
      for (const p of r.ports) expect(r.rendezvousPorts).not.toContain(p.port);
      expect(held, all).not.toBeNull();
      expect([Number(held![1]), held![3], Number(held![4])]).toEqual([HELD, holdAt, r.ports[HELD]!.port]);
      // Every other rank had all its flood connections established before its init was done.
      for (const p of r.ports.filter((x) => x.rank !== HELD)) {
        const done = initDone.get(p.rank)!;
        expect(done, all).toBeGreaterThan(holdEnd);
        const before = p.connections.filter((c) => c.connectedAt !== undefined && c.connectedAt < done);
        expect(before.length, `rank ${p.rank}: flood connections established during its init`).toBe(p.connections.length);
      }
      // The rank the held one links to accepted strangers and dropped their garbage during init:
      // while waiting in its accept loop (link: garbage ahead of the silent connections is dropped
      // during the hold), or only once the hold let it start (publish: nothing before it ended).
      const acceptor = r.ports[ACCEPTOR]!;
      const dropped = acceptor.connections.filter(
        (c) => c.kind === 'long-garbage' && c.closedByRankAt !== undefined && c.closedByRankAt < initDone.get(ACCEPTOR)!,
      );
      expect(dropped.length, `rank ${ACCEPTOR}: garbage connections it dropped during init`).toBeGreaterThan(0);
      const duringHold = acceptor.connections.filter((c) => c.closedByRankAt !== undefined && c.closedByRankAt < holdEnd);
      if (holdAt === 'link') expect(duringHold.filter((c) => c.kind === 'long-garbage').length).toBeGreaterThan(0);
      else expect(duringHold).toEqual([]);
    }, 60_000);
  }
});
