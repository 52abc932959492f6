/**
 * One rank of `topocoll tune links` (started by the launcher: two ranks, on one node for shared
 * memory, on two emulated nodes for TCP; on two cores, or both on one core for the
 * oversubscribed links). Measures the link between rank 0 (A) and rank 1 (B) through the
 * executor itself (Communicator.runProbe) and prints, on rank 0, one JSON line of raw times per
 * round (`LinksRound`); link-fit.ts turns them into the LogGP parameters.
 *
 * Every time is the median over trials, each trial a fresh call after a barrier, timed by the
 * rank named:
 * - call (both, the smaller): a call that moves nothing (both ranks run an empty schedule), c;
 * - pingpong (A): A sends a zero-byte message to B, B answers: c + 2(o_s + L + o_r);
 * - bursts of K and of 2K zero-byte messages from A to B in one call, so that the difference of
 *   the two is K messages' worth, without the call's or the first message's cost:
 *   - send (A): B receives them as they come: K·o_s more (the channel or socket holds them all,
 *     so A never waits for B);
 *   - late (B): B enters its call only after they have all arrived (it waits 2 ms first):
 *     K·o_r more;
 *   - live (B): B enters at once and receives them as they come: K·g more;
 * - sized pingpong (A), per size m: the ping-pong with m bytes each way (float64 data):
 *   c + 2(o_s + L + o_r + m·G);
 * - exchange (A), per size m: both ranks SendRecv m bytes each way at once: c + o_s + L + o_r +
 *   m·Gx (between nodes in segments of `exchangeSegmentBytes` each way, as schedules with
 *   exchanges run there);
 * - combine (B), per size m: A sends m bytes, B receives them as they are (Recv) or adding
 *   them into its own (RecvReduce, sum), the two in alternate trials: the median of the pairs'
 *   differences is what combining m bytes costs beyond receiving them (its slope over m: µs per
 *   byte). Paired trials cancel the drift that separate medians of two close times would keep.
 */
import { StepKind, type Step } from '../algorithms/schedule.js';
import { init } from '../init.js';

export interface LinkSettings {
  /** Messages per burst (K). */
  messages: number;
  /** Trials per zero-byte figure. */
  repeats: number;
  /** Trials per figure of a sized message. */
  sizedRepeats: number;
  /** Rounds: every figure is measured once per round (the noise is their spread). */
  rounds: number;
  /** Message sizes (bytes, multiples of 8) of the ping-pongs and exchanges: G and Gx. */
  sizes: number[];
  /** Message sizes of the paired Recv and RecvReduce (the combine rate); none: not measured. */
  combineSizes: number[];
  /** The two ranks share one core. */
  sameCore: boolean;
  /** Bytes each way of an exchange's segment (0: one segment; between nodes the TCP limit). */
  exchangeSegmentBytes: number;
}

/** Times (µs, medians over the trials) of one round; sized ones as [bytes, µs]. */
export interface LinksRound {
  kind: 'links';
  round: number;
  messages: number;
  callUs: number;
  pingpongUs: number;
  /** Bursts of `messages` and of twice as many: A's time sending, B's receiving late and live. */
  sendBurstUs: [number, number];
  lateBurstUs: [number, number];
  liveBurstUs: [number, number];
  pingpong: [number, number][];
  exchange: [number, number][];
  /** RecvReduce's time beyond Recv's, per size. */
  combine: [number, number][];
}

export async function linksMain(settings: LinkSettings): Promise<void> {
  const comm = await init();
  if (comm.size !== 2) throw new Error(`topocoll tune links measures between two ranks, not ${comm.size}`);
  const me = comm.rank;
  const peer = 1 - me;
  const step = (kind: StepKind): Step => ({ kind, peer, level: 0 });
  const k = settings.messages;
  const burstOf = (n: number): Step[] => Array.from({ length: n }, () => step(me === 0 ? StepKind.Send : StepKind.Recv));
  const burst = burstOf(k);
  const burst2 = burstOf(2 * k);
  const pingpong: Step[] = me === 0 ? [step(StepKind.Send), step(StepKind.Recv)] : [step(StepKind.Recv), step(StepKind.Send)];
  // Each rank sends the first half of its buffer and receives into the second.
  const exchange: Step[] = [{ kind: StepKind.SendRecv, peer, peer2: peer, level: 0, range: { first: 0, count: 1, of: 2 }, range2: { first: 1, count: 1 } }];
  const recvOne: Step[] = [step(me === 0 ? StepKind.Send : StepKind.Recv)];
  const reduceOne: Step[] = [step(me === 0 ? StepKind.Send : StepKind.RecvReduce)];
  const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  const largest = Math.max(8, ...settings.sizes.map((m) => 2 * m), ...settings.combineSizes);
  const memory = new Float64Array(largest / 8).fill(1);
  const buffer = (bytes: number) => memory.subarray(0, bytes / 8);
  // An exchange's segment holds both halves of the buffer.
  const exchangeSegment = (settings.exchangeSegmentBytes * 2) / 8;

  /**
   * This rank's time for `steps` after a barrier, µs; `late` makes B start 2 ms late: busy on its
   * core (a core that slept wakes slowly), or asleep when A needs that core to send.
   */
  const trial = (steps: Step[], options: { late?: boolean; data?: Float64Array; segment?: number }): number => {
    comm.barrierSync();
    if (options.late === true && me === 1) {
      if (settings.sameCore) sleep(2);
      else for (const until = process.hrtime.bigint() + 2_000_000n; process.hrtime.bigint() < until;);
    }
    const start = process.hrtime.bigint();
    comm.runProbe(steps, options.data, options.segment);
    return Number(process.hrtime.bigint() - start) / 1000;
  };
  const middle = (times: number[]) => times.sort((a, b) => a - b)[times.length >> 1]!;
  /** The median over `trials` of this rank's time for `steps`, µs. */
  const timed = (steps: Step[], trials: number, options: Parameters<typeof trial>[1] = {}): number =>
    middle(Array.from({ length: trials }, () => trial(steps, options)));
  const sized = (sizes: number[], steps: Step[], bytes: (m: number) => number, segment = 0): number[] =>
    sizes.map((m) => timed(steps, settings.sizedRepeats, { data: buffer(bytes(m)), segment }));
  /** Per size: the median over trial pairs of RecvReduce's time less Recv's. */
  const combineExtra = (trials: number): number[] =>
    settings.combineSizes.map((m) => {
      const data = buffer(m);
      return middle(
        Array.from({ length: trials }, () => {
          const recv = trial(recvOne, { data });
          return trial(reduceOne, { data }) - recv;
        }),
      );
    });

  // Warm-up: every schedule (and every buffer size) through the JIT, the channels and the pages;
  // the zero-byte calls until the JIT has compiled their path (a few thousand calls).
  const none: Step[] = [];
  for (let t = 0; t < 10; t++) {
    timed(none, 500);
    timed(pingpong, 500);
    timed(burst, 10);
    timed(burst2, 10);
  }
  for (const m of settings.sizes) {
    timed(pingpong, 2, { data: buffer(m) });
    timed(exchange, 2, { data: buffer(2 * m), segment: exchangeSegment });
  }
  combineExtra(2);

  for (let round = 0; round < settings.rounds; round++) {
    const figures = [
      timed(none, settings.repeats),
      timed(pingpong, settings.repeats),
      timed(burst, settings.repeats), // A's: o_s; B's: g
      timed(burst2, settings.repeats),
      timed(burst, settings.repeats, { late: true }), // B's: o_r
      timed(burst2, settings.repeats, { late: true }),
      ...sized(settings.sizes, pingpong, (m) => m),
      ...sized(settings.sizes, exchange, (m) => 2 * m, exchangeSegment),
      ...combineExtra(settings.sizedRepeats),
    ];
    // Every rank took part in every trial; the figures of the rank that measures each one count.
    const mine = Float64Array.from(figures);
    const both = new Float64Array(mine.length * 2);
    comm.allgatherSync(mine, both);
    if (me === 0) {
      const a = both.subarray(0, mine.length);
      const b = both.subarray(mine.length);
      let at = 6;
      const take = (from: Float64Array, sizes: number[]): [number, number][] => sizes.map((m) => [m, from[at++]!]);
      const record: LinksRound = {
        kind: 'links',
        round,
        messages: k,
        callUs: Math.min(a[0]!, b[0]!),
        pingpongUs: a[1]!,
        sendBurstUs: [a[2]!, a[3]!],
        lateBurstUs: [b[4]!, b[5]!],
        liveBurstUs: [b[2]!, b[3]!],
        pingpong: take(a, settings.sizes),
        exchange: take(a, settings.sizes),
        combine: take(b, settings.combineSizes),
      };
      console.log(JSON.stringify(record));
    }
  }
  comm.close();
}

if (process.env.TOPOCOLL_LINKS !== undefined) {
  await linksMain(JSON.parse(process.env.TOPOCOLL_LINKS) as LinkSettings);
}
