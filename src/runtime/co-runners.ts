/**
 * Which ranks of a node take turns on this rank's CPUs. A rank waiting on such a peer gains
 * nothing by spinning: the peer is most likely not running, and it cannot run on these CPUs
 * until the waiter gives them up. The engine yields at once on waits for them: spinning only
 * delays the peer.
 */

/** @param cpusByRank the allowed CPUs of each rank of this node, ascending. */
export function coRunnersOf(me: number, cpusByRank: ReadonlyMap<number, readonly number[]>): number[] {
  const mine = cpusByRank.get(me);
  if (mine === undefined) return [];
  const key = mine.join(',');
  const sharing = [...cpusByRank].filter(([, cpus]) => cpus.join(',') === key).map(([rank]) => rank);
  // The chance that a given other rank bound there is running: (CPUs − 1) of the others.
  const others = sharing.length - 1;
  if (others === 0 || (mine.length - 1) / others >= 0.5) return [];
  return sharing.filter((rank) => rank !== me);
}

/**
 * Whether the ranks of a host outnumber the CPUs they may run on: the host's CPUs, or fewer when
 * every one of its ranks is bound — two ranks bound to one core take turns on it as surely as
 * three unbound ranks on two cores. Every rank computes the same from the same sets.
 * @param cpusOfHostRanks the allowed CPUs of each rank of the host (an empty list: unknown).
 */
export function hostOversubscribed(cpusOfHostRanks: readonly (readonly number[])[], hostCpus: number): boolean {
  if (cpusOfHostRanks.length > hostCpus) return true;
  if (cpusOfHostRanks.some((cpus) => cpus.length === 0)) return false;
  return cpusOfHostRanks.length > new Set(cpusOfHostRanks.flat()).size;
}
