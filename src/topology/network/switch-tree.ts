/**
 * Consistency of per-node switch paths. Sources that give each node its own path (the simple
 * file, one line per node; `SLURM_TOPOLOGY_ADDR`, one address per rank) can contradict
 * themselves: the planner groups nodes by the switch at each level, so a switch that appears at
 * two levels, or under two different parents, would give groups that do not nest. We refuse such
 * input and name both places that disagree.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';
import type { NodeNetworkPath } from './types.js';

/** Where one path came from, so that a conflict can name both sides. */
export interface PathOrigin {
  /** How a message refers to it, with its preposition: `on line 7`, `for node tux2`. */
  label: string;
  where: ErrorLocation;
}

interface SwitchFact {
  /** 0-based index in the bottom-up path. */
  level: number;
  /** The next switch above on the path; `undefined` for a top switch. */
  parent: string | undefined;
  origin: PathOrigin;
}

const TREE_HINT = 'The network must be a tree: give every switch one level and one parent in every path that contains it.';

/** Accumulates paths and throws ETOPOLOGY at the first one that contradicts an earlier path. */
export class SwitchTreeChecker {
  private readonly facts = new Map<string, SwitchFact>();

  check(switches: readonly (string | undefined)[], origin: PathOrigin): void {
    switches.forEach((name, level) => {
      if (name === undefined) return;
      const parent = switches.slice(level + 1).find((s) => s !== undefined);
      const known = this.facts.get(name);
      if (known === undefined) {
        this.facts.set(name, { level, parent, origin });
        return;
      }
      if (known.level !== level) {
        throw new TopocollError(
          'ETOPOLOGY',
          `switch ${name} is at level switch${level + 1} ${origin.label} but at level switch${known.level + 1} ${known.origin.label}`,
          { ...origin.where, hint: TREE_HINT },
        );
      }
      if (known.parent !== parent) {
        throw new TopocollError(
          'ETOPOLOGY',
          `switch ${name} has ${describeParent(parent)} ${origin.label} but ${describeParent(known.parent)} ${known.origin.label}`,
          { ...origin.where, hint: TREE_HINT },
        );
      }
    });
  }
}

function describeParent(parent: string | undefined): string {
  return parent === undefined ? 'no parent (top switch)' : `parent ${parent}`;
}

/**
 * Pads every path at the top with `undefined` to the longest one, so that `switches[i]` is level
 * `switch{i+1}` for every node, and returns that number of levels.
 */
export function padToLevels(nodes: Iterable<NodeNetworkPath>): number {
  const paths = [...nodes];
  const levels = paths.reduce((max, p) => Math.max(max, p.switches.length), 0);
  for (const p of paths) while (p.switches.length < levels) p.switches.push(undefined);
  return levels;
}
