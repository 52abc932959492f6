import { TopocollError } from '../errors.js';
import { StepKind, type Schedule, type Step } from './schedule.js';

/**
 * Inclusive and exclusive scans over every rank (MPI_Scan, MPI_Exscan): rank r ends with
 * x0 op x1 op … op xr (scan) or x0 op … op x(r−1) (exscan; rank 0 with none), in rank order,
 * so any associative operator is right, commutative or not. B is the rank's running value,
 * starting as its input; the call is unsegmented.
 *
 * - scan, recursive doubling (Hillis and Steele): for d = 1, 2, 4, … < p, rank r first sends its
 *   B to r + d (when there is one), then receives B of r − d (when there is one) and combines it
 *   on the left of its own (RecvReduce, order 1: it covers lower ranks). What r has after the
 *   round with distance d covers [r − 2d + 1, r] (clipped at 0), so after ⌈log2 p⌉ rounds the
 *   whole prefix.
 * - exscan: a shift first — rank r sends its input to r + 1, then receives x(r−1) from r − 1 into
 *   B (rank 0 receives nothing, and sends only this) — then the same doubling among ranks 1 … p − 1
 *   (rank q + 1 in the place of q), which leaves rank r with x0 … x(r−1).
 * A send always completes before the receive that overwrites B (steps run in order). Deadlock
 * freedom: a rank waits only on lower ranks (and a rendezvous send on a higher rank's receive,
 * which waits only on its own lower ranks' sends).
 *
 * `rank`'s steps; every step's level is 0 (the world).
 */
export function scanSchedule(size: number, rank: number, exclusive: boolean): Schedule {
  if (!Number.isInteger(size) || size < 1 || !Number.isInteger(rank) || rank < 0 || rank >= size)
    throw new TopocollError('EINVAL', `scan: rank ${rank} of ${size} ranks`);
  const steps: Step[] = [];
  // Ranks first … size − 1 take part in the doubling: everyone, or (exscan) all but rank 0.
  let first = 0;
  if (exclusive) {
    if (rank + 1 < size) steps.push({ kind: StepKind.Send, peer: rank + 1, level: 0 });
    if (rank >= 1) steps.push({ kind: StepKind.Recv, peer: rank - 1, level: 0 });
    first = 1;
  }
  if (rank >= first) {
    for (let d = 1; d < size - first; d *= 2) {
      if (rank + d < size) steps.push({ kind: StepKind.Send, peer: rank + d, level: 0 });
      if (rank - d >= first) steps.push({ kind: StepKind.RecvReduce, peer: rank - d, level: 0, order: 1 });
    }
  }
  return { collective: 'reduce', root: 0, steps };
}
