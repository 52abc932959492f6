import { TopocollError } from '../errors.js';
import type { GroupBarrierAlgorithm } from './algorithm-choice.js';

/**
 * S4's LogP model of barrier algorithms and its adaptive choice (AdaptiveBarrierLogP): predict
 * each candidate's time from the machine's LogP parameters and the number of processes P, run
 * the argmin. The formulas are the paper's (seeds/004, restated in design/seeds.md S4, which
 * agrees with the paper text), with
 *   f_r = max(o_r, g), f_s = max(o_s, g), t_s = max(g, o_s + L + o_r):
 * - central counter: 2(o_s + L + o_r) + (P − 2)f_r + (P − 2)f_s — the root's P − 1 receives
 *   (the first after o_s + L + o_r, then one per f_r), then its P − 1 sends, the last member
 *   done o_s + L + o_r after the last send starts;
 * - combining tree of fan-in n: (o_s + L + f_r(n − 2) + o_r)·log_n P + o_s + (log2 P − 1)t_s
 *   + L + o_r — log_n P levels of n − 1 receives up (the per-level term), then the paper's
 *   release down a binomial tree. group-barrier.ts's `combining-tree:K` is this tree up with
 *   n = K (the k-nomial tree); its release is the K-nomial mirror, which for K = 2 is the
 *   binomial tree the formula assumes and for K > 2 is modelled by the paper's binomial term;
 * - dissemination: max(f_r, f_s, o_s + L + o_r)·⌈log2 P⌉ — one exchange per round. The paper
 *   prints log2 P (the extracted text shows no ceiling); the algorithm runs ⌈log2 P⌉ rounds, as
 *   seeds.md writes it, and that is what is used here.
 * The logarithms of the combining tree are real-valued, as printed (no ceiling for a P that is
 * not a power of n or 2). P = 1: no messages, 0 for every algorithm. P = 2: central counter and
 * combining-tree:2 both give 2(o_s + L + o_r) (one message up, one down), dissemination one
 * exchange.
 */
export interface LogP {
  /** Latency of one small message across the network, µs. */
  L: number;
  /** Sender overhead: how long the sending processor is busy with one message, µs. */
  os: number;
  /** Receiver overhead, µs. */
  or: number;
  /** Gap: the least time between two consecutive sends or receives of one processor, µs. */
  g: number;
}

/** The predicted time of a barrier of P processes with `algorithm`, µs (S4's formulas, above). */
export function predictBarrierUs(algorithm: GroupBarrierAlgorithm, P: number, p: LogP): number {
  checkArguments(P, p);
  if (P === 1) return 0;
  const { L, os, or, g } = p;
  const fr = Math.max(or, g);
  const fs = Math.max(os, g);
  const ts = Math.max(g, os + L + or);
  if (algorithm === 'central-counter') return 2 * (os + L + or) + (P - 2) * fr + (P - 2) * fs;
  if (algorithm === 'dissemination') return Math.max(fr, fs, os + L + or) * ceilLog2(P);
  if (
    typeof algorithm === 'object' &&
    algorithm !== null &&
    'combiningTree' in algorithm &&
    Number.isInteger(algorithm.combiningTree) &&
    algorithm.combiningTree >= 2
  ) {
    const n = algorithm.combiningTree;
    return (os + L + fr * (n - 2) + or) * (Math.log(P) / Math.log(n)) + os + (Math.log2(P) - 1) * ts + L + or;
  }
  throw new TopocollError(
    'ECONFIG',
    `"${typeof algorithm === 'object' && algorithm !== null ? JSON.stringify(algorithm) : String(algorithm)}" is not a barrier algorithm`,
    {
      hint: 'Use central-counter, combining-tree:K (K ≥ 2) or dissemination.',
    },
  );
}

/** S4's candidates: central counter, combining trees of fan-in 2, 3 and 4, dissemination. */
export const DEFAULT_BARRIER_CANDIDATES: readonly GroupBarrierAlgorithm[] = [
  'central-counter',
  { combiningTree: 2 },
  { combiningTree: 3 },
  { combiningTree: 4 },
  'dissemination',
];

export interface BarrierPrediction {
  algorithm: GroupBarrierAlgorithm;
  predictedUs: number;
}

export interface BarrierChoice extends BarrierPrediction {
  /** Every candidate's prediction, in the order of `candidates`. */
  all: BarrierPrediction[];
}

/**
 * AdaptiveBarrierLogP's choice: the candidate with the least predicted time for P processes.
 * Ties (predictions within a relative 1e-9 of each other, so that rounding cannot decide) go to
 * the candidate listed first.
 */
export function chooseBarrier(P: number, p: LogP, candidates: readonly GroupBarrierAlgorithm[] = DEFAULT_BARRIER_CANDIDATES): BarrierChoice {
  if (candidates.length === 0) throw new TopocollError('EINVAL', 'chooseBarrier needs at least one candidate algorithm');
  const all = candidates.map((algorithm) => ({ algorithm, predictedUs: predictBarrierUs(algorithm, P, p) }));
  let best = all[0]!;
  for (const c of all) if (c.predictedUs < best.predictedUs - 1e-9 * Math.max(1, Math.abs(best.predictedUs))) best = c;
  return { algorithm: best.algorithm, predictedUs: best.predictedUs, all };
}

/** ⌈log2 P⌉, the dissemination's rounds, counted exactly. */
function ceilLog2(P: number): number {
  let rounds = 0;
  for (let d = 1; d < P; d *= 2) rounds++;
  return rounds;
}

function checkArguments(P: number, p: LogP): void {
  if (!Number.isInteger(P) || P < 1) throw new TopocollError('EINVAL', `barrier model: P = ${P} is not a positive integer`);
  for (const key of ['L', 'os', 'or', 'g'] as const) {
    const v = p[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
      throw new TopocollError('EINVAL', `barrier model: LogP ${key} = ${String(v)} is not a finite number ≥ 0`);
  }
}
