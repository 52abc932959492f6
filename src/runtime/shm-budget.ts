/**
 * How the node's shared-memory budget is split: L local ranks have L·(L−1) one-way channels,
 * each gets an equal share rounded down to a power of two between 64 KiB and 4 MiB (a power of
 * two so ring offsets are a mask; the bounds keep pipelining useful and memory finite).
 */
export function channelBytes(budget: number, localSize: number): number {
  if (localSize < 2) return 64 * 1024;
  const share = budget / (localSize * (localSize - 1));
  let bytes = 64 * 1024;
  while (bytes * 2 <= share && bytes < 4 * 1024 * 1024) bytes *= 2;
  return bytes;
}
