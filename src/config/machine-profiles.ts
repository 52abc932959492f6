import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { TopocollError } from '../errors.js';
import { DEFAULT_PROFILE_VALUES } from './defaults.generated.js';
import { machineProfile, type MachineProfile } from './model-schema.js';
import { PACKAGE_ROOT } from '../util/package-root.js';

/**
 * Machine profiles: the cost-model parameters measured on one named machine, one YAML file each
 * in config/profiles/ (shipped with the package). They describe that machine only; the
 * configuration's defaults (schema.ts) take the profile named by DEFAULT_MACHINE_PROFILE, and a
 * configuration file overrides any value (`topocoll tune --out FILE` writes one for the machine
 * it runs on).
 */

/** The profile behind the configuration's defaults (and config/default.yaml's values). */
export const DEFAULT_MACHINE_PROFILE = 'default';

const PROFILES_DIRECTORY = `${PACKAGE_ROOT}config/profiles/`;

/** The file of profile `name`. */
export function machineProfilePath(name: string): string {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new TopocollError('EINVAL', `"${name}" is not a machine profile name (lower-case letters, digits and dashes)`);
  return `${PROFILES_DIRECTORY}${name}.yaml`;
}

/**
 * Reads and checks profile `name`; a missing or malformed file is ECONFIG naming it. The default
 * profile comes from its generated module (the same values, without a YAML parse at every rank's
 * start; test/config/config.test.ts checks it is current).
 */
export function loadMachineProfile(name: string): MachineProfile {
  const path = machineProfilePath(name);
  let values: unknown = DEFAULT_PROFILE_VALUES;
  if (name !== DEFAULT_MACHINE_PROFILE) {
    try {
      values = parse(readFileSync(path, 'utf8'));
    } catch (e) {
      throw new TopocollError('ECONFIG', `machine profile "${name}": cannot read ${path}: ${(e as Error).message}`);
    }
  }
  const parsed = machineProfile.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TopocollError('ECONFIG', `machine profile "${name}" (${path}): ${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}
