/**
 * One rank of `topocoll tune barrier` (started by the launcher: two ranks, on one node for the
 * shared-memory parameters, on two emulated nodes for TCP's). Measures S4's LogP parameters of
 * the link between rank 0 (A) and rank 1 (B) with zero-byte messages through the executor
 * itself (Communicator.runProbe), and prints them as one JSON line on rank 0.
 *
 * Each figure is the median over `repeats` trials, each trial a fresh call after a barrier:
 * - c, the cost of a call that moves nothing (both ranks run an empty schedule);
 * - pingpong: A sends to B, B answers: T = c + 2(o_s + L + o_r), timed on A;
 * - o_s: A sends K messages in one call while B receives them: A's time is c + K·o_s (the
 *   channel or socket holds all K, so A never waits for B);
 * - o_r: B enters its call only after A's K messages have arrived (it sleeps first): B's time
 *   is c + K·o_r;
 * - g: B enters at once and receives the K messages as they come: B's time is about
 *   c + (one way) + (K − 1)·g, so g = (T − c − one way) / (K − 1), at least max(o_s, o_r) — the
 *   gap is never shorter than either overhead;
 * - L = (pingpong − c) / 2 − o_s − o_r, at least 0.
 */
import { StepKind, type Step } from '../algorithms/schedule.js';
import { init } from '../init.js';

export interface LogpSettings {
  /** Messages per burst (K). */
  messages: number;
  /** Trials per figure. */
  repeats: number;
}

export interface LogpRecord {
  kind: 'logp';
  L: number;
  os: number;
  or: number;
  g: number;
  callUs: number;
  pingpongUs: number;
}

export async function logpMain(settings: LogpSettings): Promise<void> {
  const comm = await init();
  if (comm.size !== 2) throw new Error(`topocoll tune barrier measures between two ranks, not ${comm.size}`);
  const me = comm.rank;
  const peer = 1 - me;
  const step = (kind: StepKind): Step => ({ kind, peer, level: 0 });
  const k = settings.messages;
  const burst: Step[] = Array.from({ length: k }, () => step(me === 0 ? StepKind.Send : StepKind.Recv));
  const pingpong: Step[] = me === 0 ? [step(StepKind.Send), step(StepKind.Recv)] : [step(StepKind.Recv), step(StepKind.Send)];
  const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

  /** The median over the trials of this rank's time for `steps`, µs; `late` makes B start 2 ms late. */
  const timed = (steps: Step[], late = false): number => {
    const times: number[] = [];
    for (let t = 0; t < settings.repeats; t++) {
      comm.barrierSync();
      if (late && me === 1) sleep(2);
      const start = process.hrtime.bigint();
      comm.runProbe(steps);
      times.push(Number(process.hrtime.bigint() - start) / 1000);
    }
    times.sort((a, b) => a - b);
    return times[times.length >> 1]!;
  };
  // Warm-up: every schedule once, through the JIT.
  for (let t = 0; t < 3; t++) {
    timed([]);
    timed(pingpong);
    timed(burst);
  }
  const call = timed([]);
  const pp = timed(pingpong);
  const sendBurst = timed(burst); // A's figure: o_s
  const lateBurst = timed(burst, true); // B's figure: o_r
  const liveBurst = timed(burst); // B's figure: g

  // Every rank took part in every trial; the figures of the rank that measures each one count.
  const mine = Float64Array.of(call, pp, sendBurst, lateBurst, liveBurst);
  const theirs = new Float64Array(mine.length * 2);
  comm.allgatherSync(mine, theirs);
  if (me === 0) {
    const a = theirs.subarray(0, mine.length);
    const b = theirs.subarray(mine.length);
    const c = Math.min(a[0]!, b[0]!);
    const os = Math.max(0, (a[2]! - c) / k);
    const or = Math.max(0, (b[3]! - c) / k);
    const oneWay = Math.max(0, (a[1]! - c) / 2);
    const g = Math.max(os, or, (b[4]! - c - oneWay) / Math.max(1, k - 1));
    const L = Math.max(0, oneWay - os - or);
    const round = (x: number) => Math.round(x * 1000) / 1000;
    const record: LogpRecord = { kind: 'logp', L: round(L), os: round(os), or: round(or), g: round(g), callUs: round(c), pingpongUs: round(a[1]!) };
    console.log(JSON.stringify(record));
  }
  comm.close();
}

if (process.env.TOPOCOLL_LOGP !== undefined) {
  await logpMain(JSON.parse(process.env.TOPOCOLL_LOGP) as LogpSettings);
}
