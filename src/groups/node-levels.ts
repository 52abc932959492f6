import { HARDWARE_LEVELS, LOCALITY_CODE, type HardwareLevel, type Locality } from '../topology/types.js';
import { localityIndices } from '../topology/locality-string.js';

/**
 * Which hardware levels carry groups on one compute node (normative rule 1 of the group
 * planner). Only the ranks' locality strings on that node matter, so the result is computed
 * on local indices (0 … ranks on the node − 1) and can be shared between nodes whose ranks
 * have the same sequence of locality strings.
 */

/** A hardware level kept on a node, with the unit each local rank sits in. */
export interface KeptHardwareLevel {
  level: HardwareLevel;
  /** For each local rank, a label of its unit: the local index of the first rank in it. */
  unitOf: Int32Array;
}

/** Why a level carries no groups on a node; formatted with real ranks by `describeDrop`. */
export type DropReason =
  | { kind: 'disabled' }
  | { kind: 'unknown'; local: number }
  | { kind: 'spans'; local: number; units: number[] }
  | { kind: 'one-rank-per-unit' }
  | { kind: 'not-nested'; other: HardwareLevel }
  | { kind: 'same-as'; above: HardwareLevel | 'node' };

export interface DroppedHardwareLevel {
  level: HardwareLevel;
  reason: DropReason;
}

export interface NodeLevelSelection {
  /** Kept levels bottom-up (finest partition first). */
  kept: KeptHardwareLevel[];
  dropped: DroppedHardwareLevel[];
}

interface Candidate {
  level: HardwareLevel;
  unitOf: Int32Array;
  blocks: number;
}

/**
 * @param localities one per rank on the node, ascending by rank; `undefined` = not known
 *   (the process reported no locality, e.g. it is not bound).
 * @param enabled hardware levels not disabled by configuration.
 */
export function selectNodeLevels(localities: readonly (Locality | undefined)[], enabled: ReadonlySet<string>): NodeLevelSelection {
  const dropped: DroppedHardwareLevel[] = [];
  let candidates: Candidate[] = [];
  for (const level of HARDWARE_LEVELS) {
    if (!enabled.has(level)) {
      dropped.push({ level, reason: { kind: 'disabled' } });
      continue;
    }
    const partition = partitionOf(level, localities);
    if ('kind' in partition) {
      dropped.push({ level, reason: partition });
    } else if (partition.blocks === localities.length) {
      dropped.push({ level, reason: { kind: 'one-rank-per-unit' } });
    } else {
      candidates.push({ level, ...partition });
    }
  }

  candidates = dropNonNesting(candidates, dropped);

  // Finest first; equal partitions keep the fixed bottom-up order so the upper name survives.
  candidates.sort((a, b) => b.blocks - a.blocks || HARDWARE_LEVELS.indexOf(a.level) - HARDWARE_LEVELS.indexOf(b.level));

  // Top-down: a level whose partition equals that of the next kept level above adds nothing.
  const kept: KeptHardwareLevel[] = [];
  let above: Candidate | undefined;
  for (let i = candidates.length - 1; i >= 0; i--) {
    const c = candidates[i]!;
    const sameAsAbove = above === undefined ? c.blocks === 1 : samePartition(c, above);
    if (sameAsAbove) {
      dropped.push({ level: c.level, reason: { kind: 'same-as', above: above?.level ?? 'node' } });
    } else {
      kept.unshift({ level: c.level, unitOf: c.unitOf });
      above = c;
    }
  }
  dropped.sort((a, b) => HARDWARE_LEVELS.indexOf(a.level) - HARDWARE_LEVELS.indexOf(b.level));
  return { kept, dropped };
}

/** The node's ranks split by their unit of `level`, or why they cannot be. */
function partitionOf(level: HardwareLevel, localities: readonly (Locality | undefined)[]): { unitOf: Int32Array; blocks: number } | DropReason {
  const code = LOCALITY_CODE[level];
  const unitOf = new Int32Array(localities.length);
  const firstRankOfUnit = new Map<number, number>();
  for (let i = 0; i < localities.length; i++) {
    const loc = localities[i];
    const indices = loc === undefined ? undefined : localityIndices(loc, code);
    if (indices === undefined || indices.length === 0) return { kind: 'unknown', local: i };
    if (indices.length > 1) return { kind: 'spans', local: i, units: indices };
    const unit = indices[0]!;
    let label = firstRankOfUnit.get(unit);
    if (label === undefined) {
      label = i;
      firstRankOfUnit.set(unit, i);
    }
    unitOf[i] = label;
  }
  return { unitOf, blocks: firstRankOfUnit.size };
}

/** Labels are first-member indices, so equal partitions have identical label arrays. */
function samePartition(a: Candidate, b: Candidate): boolean {
  if (a.blocks !== b.blocks) return false;
  for (let i = 0; i < a.unitOf.length; i++) if (a.unitOf[i] !== b.unitOf[i]) return false;
  return true;
}

/** True when every block of `fine` lies inside one block of `coarse`. */
function refines(fine: Candidate, coarse: Candidate): boolean {
  const coarseOfFine = new Map<number, number>();
  for (let i = 0; i < fine.unitOf.length; i++) {
    const f = fine.unitOf[i]!;
    const c = coarse.unitOf[i]!;
    const seen = coarseOfFine.get(f);
    if (seen === undefined) coarseOfFine.set(f, c);
    else if (seen !== c) return false;
  }
  return true;
}

function nests(a: Candidate, b: Candidate): boolean {
  return a.blocks >= b.blocks ? refines(a, b) : refines(b, a);
}

/**
 * Levels must form a chain under inclusion. While some pair does not nest, drop the level in
 * the most conflicts (ties: the one higher in the fixed order), so one odd level cannot take
 * a consistent set down with it.
 */
function dropNonNesting(candidates: Candidate[], dropped: DroppedHardwareLevel[]): Candidate[] {
  let remaining = candidates;
  for (;;) {
    const conflicts = remaining.map((a) => remaining.filter((b) => a !== b && !nests(a, b)));
    let worst = -1;
    for (let i = 0; i < remaining.length; i++) {
      if (conflicts[i]!.length === 0) continue;
      if (worst < 0 || conflicts[i]!.length >= conflicts[worst]!.length) worst = i;
    }
    if (worst < 0) return remaining;
    const victim = remaining[worst]!;
    dropped.push({ level: victim.level, reason: { kind: 'not-nested', other: conflicts[worst]![0]!.level } });
    remaining = remaining.filter((c) => c !== victim);
  }
}

/** Human text for a drop, naming real ranks (`ranks` maps local index → rank). */
export function describeDrop(level: HardwareLevel, reason: DropReason, ranks: readonly number[]): string {
  switch (reason.kind) {
    case 'disabled':
      return 'disabled by configuration';
    case 'unknown':
      return `rank ${ranks[reason.local]} has no ${LOCALITY_CODE[level]} entry in its locality (unbound or unknown placement)`;
    case 'spans':
      return `rank ${ranks[reason.local]} spans ${reason.units.length} ${level} units (${reason.units.join(',')})`;
    case 'one-rank-per-unit':
      return `every ${level} unit holds one rank`;
    case 'not-nested':
      return `its groups do not nest with those of ${reason.other}`;
    case 'same-as':
      return `same groups as ${reason.above}`;
  }
}

/** Drops that deserve a warning rather than a plain note. */
export function isWarningDrop(reason: DropReason): boolean {
  return reason.kind === 'not-nested';
}
