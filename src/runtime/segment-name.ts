/**
 * Names of the nodes' shared segments. The job token makes them unique per job; the launcher
 * uses the same rule to remove whatever a job killed during init left in /dev/shm.
 */
export function segmentPrefix(token: string): string {
  return `topocoll-${token.slice(0, 16)}-`;
}

/** The POSIX shm name (leading slash) of node `nodeIndex`'s segment. */
export function segmentName(token: string, nodeIndex: number): string {
  return `/${segmentPrefix(token)}${nodeIndex}`;
}
