/**
 * Consistency of per-node switch paths. Sources that give each node its own path (the simple
 * file, one line per node; `SLURM_TOPOLOGY_ADDR`, one address per rank) can contradict
 * themselves: the planner groups nodes by the switch at each level, so a switch that appears at
 * two levels, or under two different parents, would give groups that do not nest. We refuse such
 * input and name both places that disagree.
 */
import { TopocollError, type ErrorLocation } from '../../errors.js';
import type { NodeNetworkPath } from './types.js';
import { quote } from '../../util/quote.js';

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

/**
 * Switch levels above the nodes. Real fabrics have two to four; every level becomes a level of
 * groups, and every node's path is stored padded to the deepest.
 */
export const MAX_SWITCH_LEVELS = 64;
/**
 * Distinct switches in one network description: a fat tree of a hundred thousand nodes has a few
 * thousand switches.
 */
export const MAX_SWITCHES = 1 << 16;
/** A switch name, like a host name, has at most 255 characters. */
export const MAX_SWITCH_NAME_LENGTH = 255;

/** Accumulates paths and throws ETOPOLOGY at the first one that contradicts an earlier path. */
export class SwitchTreeChecker {
  private readonly facts = new Map<string, SwitchFact>();

  check(switches: readonly (string | undefined)[], origin: PathOrigin): void {
    if (switches.length > MAX_SWITCH_LEVELS) {
      throw new TopocollError('ETOPOLOGY', `the path ${origin.label} has more than ${MAX_SWITCH_LEVELS} switch levels, the limit for one network`, {
        ...origin.where,
        hint: 'List the switches of one path bottom-up, one per level; fabrics have a handful of levels.',
      });
    }
    switches.forEach((name, level) => {
      if (name === undefined) return;
      const parent = switches.slice(level + 1).find((s) => s !== undefined);
      const known = this.facts.get(name);
      if (known === undefined) {
        checkSwitchName(name, origin.where);
        if (this.facts.size === MAX_SWITCHES) {
          throw new TopocollError('ETOPOLOGY', `switch ${name} ${origin.label} takes the network past ${MAX_SWITCHES} switches, the limit for one network`, {
            ...origin.where,
            hint: 'Check the file: a network of a million nodes has a few thousand switches.',
          });
        }
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

/** Refuses a switch name longer than MAX_SWITCH_NAME_LENGTH, before it is stored or quoted. */
export function checkSwitchName(name: string, where: ErrorLocation): void {
  if (name.length > MAX_SWITCH_NAME_LENGTH) {
    throw new TopocollError('ETOPOLOGY', `switch name ${quote(name)} is longer than ${MAX_SWITCH_NAME_LENGTH} characters`, {
      ...where,
      hint: 'Check the file for a missing line break or separator.',
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
