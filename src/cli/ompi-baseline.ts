import type { BenchSettings } from './bench-worker.js';
import { peerUnavailable, runPeer, type PeerRun } from './mpi-peers.js';

/**
 * Open MPI with its defaults (coll/tuned) as the one baseline of `topocoll bench --strategies`
 * and `bench barrier --explain`: the `ompi` peer of mpi-peers.ts.
 */

/** Why there is no baseline, or undefined when there can be one (building the harness if needed). */
export function ompiUnavailable(): string | undefined {
  return peerUnavailable('ompi');
}

export type OmpiRun = PeerRun;

/** Runs one collective's sweep under mpirun. */
export function runOmpi(collective: string, ranks: number, settings: BenchSettings): Promise<OmpiRun> {
  return runPeer('ompi', collective, ranks, settings);
}
