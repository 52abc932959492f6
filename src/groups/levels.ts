import { TopocollError } from '../errors.js';
import { HARDWARE_LEVELS, type HardwareLevel } from '../topology/types.js';

/**
 * Level names, bottom-up: hardware levels inside a node, then `node`, then the network's switch
 * levels `switch1` (leaf) … `switchK`, then `world` when more than one unit is left at the top.
 */
export type LevelName = HardwareLevel | 'node' | `switch${number}` | 'world';

export function switchLevelName(k: number): `switch${number}` {
  return `switch${k}`;
}

export function isHardwareLevel(name: string): name is HardwareLevel {
  return (HARDWARE_LEVELS as readonly string[]).includes(name);
}

/** `switch3` → 3; anything else → undefined. */
export function switchLevelNumber(name: string): number | undefined {
  const m = /^switch([1-9][0-9]*)$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** Every level name that exists for a network of `switchLevels` levels, bottom-up. */
export function allLevelNames(switchLevels: number): LevelName[] {
  const names: LevelName[] = [...HARDWARE_LEVELS, 'node'];
  for (let k = 1; k <= switchLevels; k++) names.push(switchLevelName(k));
  names.push('world');
  return names;
}

/**
 * Checks a list of levels to disable and returns it as a set. `world` cannot be disabled: it
 * is what joins the top units, without it there would be no single collective.
 */
export function validateDisabledLevels(disabled: readonly string[], switchLevels: number): Set<string> {
  const known = new Set<string>(allLevelNames(switchLevels));
  for (const name of disabled) {
    if (name === 'world') {
      throw new TopocollError('EINVAL', 'the level world cannot be disabled', {
        level: name,
        hint: 'world joins the top-level units into one collective; disable a lower level instead.',
      });
    }
    if (!known.has(name)) {
      const switches = switchLevels > 0 ? `, switch1…switch${switchLevels}` : ' (no switch levels: no network was given)';
      throw new TopocollError('EINVAL', `unknown level "${name}"`, {
        level: name,
        hint: `Levels that can be disabled: ${HARDWARE_LEVELS.join(', ')}, node${switches}.`,
      });
    }
  }
  return new Set(disabled);
}
