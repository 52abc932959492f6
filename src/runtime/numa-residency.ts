/**
 * Where memory pages reside, against the NUMA node they should be on (not where ranks run:
 * that is a RankPlacement). S0 wants each rank's queue on the rank's own NUMA node, which first
 * touch arranges. `move_pages` (query mode) reports where each page really is; this turns the
 * per-page answer into a verdict. Pure, so the logic is tested without a NUMA machine.
 */

/** The residency verdict for one buffer; public as PlacementReport, what Communicator.placement() returns. */
export interface PlacementReport {
  pages: number;
  /** Pages on the expected node (all resident pages when no node is expected). */
  onNode: number;
  /** Resident pages per node. */
  byNode: Record<number, number>;
  /** Pages not resident yet (never touched). */
  absent: number;
  /** The node the pages should be on, when the rank is bound inside one. */
  expectedNode?: number;
  verdict: 'local' | 'misplaced' | 'unknown';
}

const ENOENT = 2;

/** @param status move_pages' answer per page: a node number, or −errno. */
export function summarizeResidency(status: ArrayLike<number>, expectedNode?: number): PlacementReport {
  const byNode: Record<number, number> = {};
  let absent = 0;
  for (let i = 0; i < status.length; i++) {
    const s = status[i]!;
    if (s >= 0) byNode[s] = (byNode[s] ?? 0) + 1;
    else if (s === -ENOENT) absent++;
  }
  const resident = Object.values(byNode).reduce((a, b) => a + b, 0);
  const onNode = expectedNode === undefined ? resident : (byNode[expectedNode] ?? 0);
  let verdict: PlacementReport['verdict'] = 'unknown';
  if (resident > 0) verdict = onNode === resident ? 'local' : 'misplaced';
  return { pages: status.length, onNode, byNode, absent, ...(expectedNode === undefined ? {} : { expectedNode }), verdict };
}

export function describeResidency(r: PlacementReport): string {
  if (r.verdict === 'unknown') return r.pages === 0 ? 'not available (no move_pages or nothing mapped)' : `no page resident yet (${r.pages} pages)`;
  const nodes = Object.entries(r.byNode)
    .map(([n, c]) => `node ${n}: ${c}`)
    .join(', ');
  const where = r.expectedNode === undefined ? '' : ` (expected node ${r.expectedNode})`;
  return `${r.verdict === 'local' ? 'local' : 'MISPLACED'} — ${r.pages} pages, ${nodes}${where}`;
}

/** The OS index of the one NUMA node `cpus` lie in, or undefined when they span several (or none is known). */
export function numaNodeOf(numa: readonly { osIndex?: number; pus: number[] }[] | undefined, cpus: readonly number[]): number | undefined {
  const touched = (numa ?? []).filter((n) => n.pus.some((pu) => cpus.includes(pu)));
  return touched.length === 1 ? touched[0]!.osIndex : undefined;
}
