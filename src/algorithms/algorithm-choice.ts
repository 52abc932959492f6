import { TopocollError } from '../errors.js';

/**
 * The algorithms a group can run a collective with, as chosen per group (usually per level) by
 * configuration. Names are strings; the k-nomial tree carries its radix (`{ knomial: K }`,
 * written `knomial:K`; `knomial:2` is `binomial`, and parses as it), the barrier's combining
 * tree its fan-in (`{ combiningTree: K }`, written `combining-tree:K`, no alias).
 */
export type KnomialChoice = { knomial: number };

/** A barrier's combining tree of fan-in K ≥ 2 (group-barrier.ts). */
export type CombiningTreeChoice = { combiningTree: number };

/** Bcast inside one group: see `groupBcastSteps`. */
export type BcastAlgorithm = 'flat' | 'binomial' | KnomialChoice | 'scatter-allgather' | 'shm';

/** Reduce inside one group: see `groupReduceSteps`. */
export type ReduceAlgorithm = 'flat' | 'binomial' | KnomialChoice | 'rabenseifner' | 'shm';

/** Allreduce among one group (the top group of a reduce-allreduce-bcast): see `groupAllreduceSteps`. */
export type AllreduceAlgorithm = 'recursive-doubling' | 'rabenseifner';

/**
 * Allgather among one group (each level of a hierarchical allgather's gather phase): see
 * `groupAllgatherSteps`; `shm` (each member publishes its blocks through the shared-memory
 * engine) only for a group inside one node registered with that engine.
 */
export type GroupAllgatherAlgorithm = 'ring' | 'recursive-doubling' | 'bruck' | 'neighbor-exchange' | 'shm';

/** What configuration may name for an allgather: every group allgather. */
export type AllgatherAlgorithm = GroupAllgatherAlgorithm;

/** Gather to, and scatter from, one member of a group (each level of a hierarchical gather or scatter): see `groupGatherSteps`. */
export type GroupGatherAlgorithm = 'flat' | 'binomial';

/** Barrier inside one group (each level of a hierarchical barrier): see `groupBarrierSteps`. */
export type GroupBarrierAlgorithm = 'central-counter' | CombiningTreeChoice | 'dissemination';

export type GroupAlgorithm = BcastAlgorithm | ReduceAlgorithm | AllreduceAlgorithm | AllgatherAlgorithm | GroupGatherAlgorithm | GroupBarrierAlgorithm;

export type CollectiveAlgorithmKind = 'bcast' | 'reduce' | 'allreduce' | 'allgather' | 'gather' | 'scatter' | 'barrier';

const NAMES: Record<CollectiveAlgorithmKind, readonly string[]> = {
  bcast: ['flat', 'binomial', 'knomial:K', 'scatter-allgather', 'shm'],
  reduce: ['flat', 'binomial', 'knomial:K', 'rabenseifner', 'shm'],
  allreduce: ['recursive-doubling', 'rabenseifner'],
  allgather: ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange', 'shm'],
  gather: ['flat', 'binomial'],
  scatter: ['flat', 'binomial'],
  barrier: ['central-counter', 'combining-tree:K', 'dissemination'],
};

/** Largest accepted k-nomial radix or combining-tree fan-in (any radix ≥ the group size is a flat tree). */
export const MAX_KNOMIAL_RADIX = 2 ** 31 - 1;

/**
 * Parses an algorithm name: `flat`, `binomial`, `knomial:K` (K ≥ 2), `scatter-allgather`,
 * `shm`, `rabenseifner`, `recursive-doubling`, `ring`, `bruck`, `neighbor-exchange`,
 * `central-counter`, `combining-tree:K` (K ≥ 2), `dissemination`. With `kind`, only the algorithms of that
 * collective are accepted. Bad input is an ECONFIG error naming the accepted forms.
 */
export function parseAlgorithm(text: string, kind: 'bcast'): BcastAlgorithm;
export function parseAlgorithm(text: string, kind: 'reduce'): ReduceAlgorithm;
export function parseAlgorithm(text: string, kind: 'allreduce'): AllreduceAlgorithm;
export function parseAlgorithm(text: string, kind: 'allgather'): AllgatherAlgorithm;
export function parseAlgorithm(text: string, kind: 'gather' | 'scatter'): GroupGatherAlgorithm;
export function parseAlgorithm(text: string, kind: 'barrier'): GroupBarrierAlgorithm;
export function parseAlgorithm(text: string, kind?: CollectiveAlgorithmKind): GroupAlgorithm;
export function parseAlgorithm(text: string, kind?: CollectiveAlgorithmKind): GroupAlgorithm {
  const accepted = kind === undefined ? [...new Set(Object.values(NAMES).flat())] : NAMES[kind];
  const hint = `Use ${accepted.join(', ')}.`;
  const what = kind === undefined ? 'algorithm' : `${kind} algorithm`;
  const algorithm = parseAnyAlgorithm(text, what, hint);
  const name = typeof algorithm === 'string' ? algorithm : 'knomial' in algorithm ? 'knomial:K' : 'combining-tree:K';
  if (!accepted.includes(name)) throw new TopocollError('ECONFIG', `"${text}" is not ${/^[aeiou]/.test(what) ? 'an' : 'a'} ${what}`, { hint });
  return algorithm;
}

/** The canonical text of an algorithm (`{ knomial: 2 }` is `binomial`); `parseAlgorithm` reads it back. */
export function formatAlgorithm(a: GroupAlgorithm): string {
  if (typeof a === 'string') return a;
  if ('combiningTree' in a) return `combining-tree:${a.combiningTree}`;
  return a.knomial === 2 ? 'binomial' : `knomial:${a.knomial}`;
}

function parseAnyAlgorithm(text: string, what: string, hint: string): GroupAlgorithm {
  switch (text) {
    case 'flat':
    case 'binomial':
    case 'scatter-allgather':
    case 'shm':
    case 'rabenseifner':
    case 'recursive-doubling':
    case 'ring':
    case 'bruck':
    case 'neighbor-exchange':
    case 'central-counter':
    case 'dissemination':
      return text;
  }
  const m = /^(knomial|combining-tree):(.*)$/.exec(text);
  if (m === null) throw new TopocollError('ECONFIG', `unknown ${what} "${text}"`, { hint });
  const radix = /^[0-9]+$/.test(m[2]!) ? Number(m[2]) : NaN;
  const tree = m[1] === 'knomial';
  if (!(radix >= 2 && radix <= MAX_KNOMIAL_RADIX)) {
    throw new TopocollError('ECONFIG', `${tree ? 'k-nomial radix' : 'combining-tree fan-in'} "${m[2]}" in "${text}" is not an integer ≥ 2`, { hint });
  }
  if (!tree) return { combiningTree: radix };
  return radix === 2 ? 'binomial' : { knomial: radix };
}
