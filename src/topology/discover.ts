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

/**
 * How `topocoll run` hands its ranks the lstopo output it got itself on the same machine, so
 * that a job does not start lstopo once per rank (a process start each, a good part of a rank's
 * init). The launcher passes output of at most LSTOPO_HANDOFF_MAX_BYTES (a Linux environment
 * string may not exceed 128 KiB); the ranks of a larger machine run lstopo themselves. A rank
 * takes it where it would have run lstopo, so the order of sources above is unchanged.
 */
export const LSTOPO_XML_ENV = 'TOPOCOLL_LSTOPO_XML';
export const LSTOPO_HANDOFF_MAX_BYTES = 64 * 1024;

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
  return discoverMachineAndXml(options).machine;
}

/** discoverMachine, and the XML of the lstopo run when that is where the machine came from. */
export function discoverMachineAndXml(options: DiscoverOptions = {}): { machine: MachineTopology; lstopoXml?: string } {
  const env = options.env ?? process.env;
  const source = options.source ?? 'auto';
  if (source === 'sysfs') return { machine: readSysfsTopology(options.sysfsRoot ?? '/') };
  if (source !== 'lstopo') {
    if (options.hwlocXml !== undefined) {
      if (options.hwlocXml === '') throw new TopocollError('EINVAL', 'the hwloc XML path is empty');
      return { machine: readHwlocXmlFile(options.hwlocXml) };
    }
    const fromEnv = env.HWLOC_XMLFILE;
    if (fromEnv !== undefined && fromEnv !== '') {
      return { machine: { ...readHwlocXmlFile(fromEnv), source: `HWLOC_XMLFILE:${fromEnv}` } };
    }
    if (source === 'hwloc-xml') {
      throw new TopocollError('ECONFIG', 'the topology source is hwloc-xml but no file is given', {
        hint: 'Set topology.hwlocXml in the configuration, or HWLOC_XMLFILE.',
      });
    }
  }
  const handed = env[LSTOPO_XML_ENV];
  const xml = handed !== undefined && handed !== '' ? handed : runLstopo(env);
  if (xml !== undefined) return { machine: { ...parseHwlocXml(xml, 'lstopo-no-graphics output'), source: 'lstopo' }, lstopoXml: xml };
  if (source === 'lstopo') {
    throw new TopocollError('ETOPOLOGY', 'the topology source is lstopo but lstopo-no-graphics is not installed or failed', {
      hint: 'Install hwloc (apt-get install hwloc), or use topology.source auto or sysfs.',
    });
  }
  return { machine: readSysfsTopology(options.sysfsRoot ?? '/') };
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
