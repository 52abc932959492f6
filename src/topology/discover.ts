import { execFileSync } from 'node:child_process';
import { TopocollError } from '../errors.js';
import { parseHwlocXml, readHwlocXmlFile } from './hwloc-xml.js';
import { readSysfsTopology } from './sysfs.js';
import type { MachineTopology } from './types.js';

/**
 * Finds the machine's topology from the best source available, in the order a user would
 * expect overrides to win: an explicit hwloc XML file, then `HWLOC_XMLFILE` (which every
 * hwloc-based tool, PMIx included, would also honour), then a live `lstopo` run, then sysfs.
 */

export interface DiscoverOptions {
  /** An hwloc XML file to use instead of discovering the machine. */
  hwlocXml?: string;
  /** Environment to read `HWLOC_XMLFILE` from and to run lstopo with; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Root of the sysfs tree for the last-resort fallback; default `/`. */
  sysfsRoot?: string;
  /**
   * Which source to use: `auto` (default) tries them in order; `hwloc-xml` requires the file
   * (or HWLOC_XMLFILE); `lstopo` requires lstopo to work; `sysfs` reads sysfs only.
   */
  source?: 'auto' | 'hwloc-xml' | 'lstopo' | 'sysfs';
}

/** lstopo takes well under a second even on large machines; a hung one must not stall startup. */
const LSTOPO_TIMEOUT_MS = 10_000;

/**
 * Returns the machine, with `source` saying where it came from: `hwloc-xml:<path>`,
 * `HWLOC_XMLFILE:<path>`, `lstopo` or `sysfs`. A named XML file that cannot be read or parsed
 * is an error, never silently replaced by another source. An lstopo that is missing, fails or
 * hangs is skipped; output it did print but that does not parse is an error, since falling
 * back would hide a real incompatibility.
 */
export function discoverMachine(options: DiscoverOptions = {}): MachineTopology {
  const env = options.env ?? process.env;
  const source = options.source ?? 'auto';
  if (source === 'sysfs') return readSysfsTopology(options.sysfsRoot ?? '/');
  if (source !== 'lstopo') {
    if (options.hwlocXml !== undefined) {
      if (options.hwlocXml === '') throw new TopocollError('EINVAL', 'the hwloc XML path is empty');
      return readHwlocXmlFile(options.hwlocXml);
    }
    const fromEnv = env.HWLOC_XMLFILE;
    if (fromEnv !== undefined && fromEnv !== '') {
      return { ...readHwlocXmlFile(fromEnv), source: `HWLOC_XMLFILE:${fromEnv}` };
    }
    if (source === 'hwloc-xml') {
      throw new TopocollError('ECONFIG', 'the topology source is hwloc-xml but no file is given', {
        hint: 'Set topology.hwlocXml in the configuration, or HWLOC_XMLFILE.',
      });
    }
  }
  const xml = runLstopo(env);
  if (xml !== undefined) return { ...parseHwlocXml(xml, 'lstopo-no-graphics output'), source: 'lstopo' };
  if (source === 'lstopo') {
    throw new TopocollError('ETOPOLOGY', 'the topology source is lstopo but lstopo-no-graphics is not installed or failed', {
      hint: 'Install hwloc (apt-get install hwloc), or use topology.source auto or sysfs.',
    });
  }
  return readSysfsTopology(options.sysfsRoot ?? '/');
}

/** The XML lstopo prints, or undefined when it is not installed or fails. */
function runLstopo(env: NodeJS.ProcessEnv): string | undefined {
  try {
    return execFileSync('lstopo-no-graphics', ['--of', 'xml', '--no-io'], {
      env,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: LSTOPO_TIMEOUT_MS,
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch {
    return undefined;
  }
}
