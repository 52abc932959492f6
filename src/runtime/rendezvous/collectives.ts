import { TopocollError, isTopocollError } from '../../errors.js';
import { validateTimeout, validateKey } from './protocol.js';
import type { RendezvousClient } from './client.js';

/**
 * Collectives over the key-value store: allgather and barrier of all ranks of a job during init,
 * built from a RendezvousClient's puts and gets.
 */

function validateGroup(what: string, name: string, rank: number, size: number): void {
  validateKey(name, what);
  if (!Number.isSafeInteger(size) || size < 1) {
    throw new TopocollError('EINVAL', `${what} '${name}': size must be a positive integer, got ${String(size)}`);
  }
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= size) {
    throw new TopocollError('EINVAL', `${what} '${name}': rank ${String(rank)} is not in 0..${size - 1}`);
  }
}

/** Names the ranks whose gets timed out: `3, 7, 12 (and 40 more)`. */
function describeRanks(ranks: number[]): string {
  const shown = ranks.slice(0, 10).join(', ');
  return ranks.length > 10 ? `${shown} (and ${ranks.length - 10} more)` : shown;
}

/**
 * Rank 0's half of a gather: waits (all gets in flight at once) for `name/1` … `name/<size-1>`.
 * ETIMEDOUT names the ranks that never arrived.
 */
async function gatherAtRoot(
  what: string,
  client: RendezvousClient,
  name: string,
  size: number,
  own: string,
  remainingMs: number,
  timeoutMs: number,
): Promise<string[]> {
  const gets: Promise<string>[] = [Promise.resolve(own)];
  for (let r = 1; r < size; r++) gets.push(client.get(`${name}/${r}`, remainingMs));
  const settled = await Promise.allSettled(gets);
  const values: string[] = [];
  const missing: number[] = [];
  // The first failure other than a timeout, as it was thrown.
  const other = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected' && !isTopocollError(s.reason, 'ETIMEDOUT'));
  settled.forEach((s, r) => {
    if (s.status === 'fulfilled') values.push(s.value);
    else if (isTopocollError(s.reason, 'ETIMEDOUT')) missing.push(r);
  });
  if (other !== undefined) throw other.reason as unknown;
  if (missing.length > 0) {
    throw new TopocollError('ETIMEDOUT', `${what} '${name}': rank(s) ${describeRanks(missing)} of ${size} did not arrive within ${timeoutMs} ms`, {
      rank: 0,
      hint: 'Those ranks may not have started, may have died, or may be stuck elsewhere.',
    });
  }
  return values;
}

/** How much longer the other ranks wait for rank 0's result than rank 0 waits for them. */
const ROOT_FIRST_MS = 1000;

/** A non-root rank's wait for rank 0 to publish `key`; ETIMEDOUT says why it may not have. */
async function awaitRoot(
  what: string,
  client: RendezvousClient,
  name: string,
  key: string,
  rank: number,
  size: number,
  remainingMs: number,
  timeoutMs: number,
): Promise<string> {
  try {
    // Rank 0 gives up first: it knows which ranks are missing, and its abort reaches this get.
    return await client.get(key, remainingMs + ROOT_FIRST_MS);
  } catch (e) {
    if (!isTopocollError(e, 'ETIMEDOUT')) throw e;
    throw new TopocollError('ETIMEDOUT', `${what} '${name}': not all ${size} ranks arrived within ${timeoutMs} ms (rank 0 did not publish '${key}')`, {
      rank,
      cause: e,
      hint: "Rank 0's error names the missing ranks (unless rank 0 itself is the one missing).",
    });
  }
}

/**
 * Every rank puts `name/<rank>` = `value`; the result, indexed by rank, is identical on every rank.
 * Rank 0 gets all the values (concurrently) and puts them as one JSON array under `name/all`, which
 * the other ranks get: 3·size requests in all rather than size² (one get per rank per value), which
 * is what keeps a few thousand ranks fast. The individual keys `name/<rank>` remain readable.
 */
export async function allgather(client: RendezvousClient, name: string, rank: number, size: number, value: string, timeoutMs: number): Promise<string[]> {
  validateGroup('allgather', name, rank, size);
  validateTimeout(timeoutMs, `allgather '${name}'`);
  if (typeof value !== 'string') throw new TopocollError('EINVAL', `allgather '${name}': the value must be a string (JSON-encode it)`);
  const deadline = Date.now() + timeoutMs;
  await client.put(`${name}/${rank}`, value);
  if (size === 1) return [value];
  const remaining = Math.max(1, deadline - Date.now());
  if (rank === 0) {
    const values = await gatherAtRoot('allgather', client, name, size, value, remaining, timeoutMs);
    await client.put(`${name}/all`, JSON.stringify(values));
    return values;
  }
  const all = await awaitRoot('allgather', client, name, `${name}/all`, rank, size, remaining, timeoutMs);
  let values: unknown;
  try {
    values = JSON.parse(all);
  } catch {
    values = undefined;
  }
  if (!Array.isArray(values) || values.length !== size || !values.every((v) => typeof v === 'string') || values[rank] !== value) {
    throw new TopocollError('EINVAL', `allgather '${name}': '${name}/all' does not hold the ${size} values of this allgather`, {
      rank,
      hint: 'Use a fresh name for every allgather, and the same size on every rank.',
    });
  }
  return values;
}

/**
 * Returns once all `size` ranks have entered the barrier `name`. Every rank puts `name/<rank>`;
 * rank 0 waits for all of them and puts `name/done`, which the others wait for — O(size) requests.
 */
export async function barrier(client: RendezvousClient, name: string, rank: number, size: number, timeoutMs: number): Promise<void> {
  validateGroup('barrier', name, rank, size);
  validateTimeout(timeoutMs, `barrier '${name}'`);
  if (size === 1) return;
  const deadline = Date.now() + timeoutMs;
  await client.put(`${name}/${rank}`, '');
  const remaining = Math.max(1, deadline - Date.now());
  if (rank === 0) {
    await gatherAtRoot('barrier', client, name, size, '', remaining, timeoutMs);
    await client.put(`${name}/done`, '');
  } else {
    await awaitRoot('barrier', client, name, `${name}/done`, rank, size, remaining, timeoutMs);
  }
}
