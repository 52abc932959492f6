import { execFileSync } from 'node:child_process';
import * as z from 'zod';
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
 * How `topocoll run` hands its ranks the machine it got from lstopo on the same machine, so that
 * a job does not start lstopo once per rank (a process start each) nor parse its XML in every
 * rank (the XML parser's cold start, a tenth of a rank's init): the parsed machine as JSON, of at
 * most MACHINE_HANDOFF_MAX_BYTES (a Linux environment string may not exceed 128 KiB); the ranks of
 * a larger machine run lstopo themselves. A rank takes it where it would have run lstopo, so the
 * order of sources above is unchanged.
 */
export const MACHINE_HANDOFF_ENV = 'TOPOCOLL_LSTOPO_MACHINE';
export const MACHINE_HANDOFF_MAX_BYTES = 64 * 1024;

/** What a launcher hands down: the machine's JSON when it came from lstopo and is small enough. */
export function machineHandoff(machine: MachineTopology): string | undefined {
  if (machine.source !== 'lstopo') return undefined;
  const json = JSON.stringify(machine);
  return Buffer.byteLength(json) <= MACHINE_HANDOFF_MAX_BYTES ? json : undefined;
}

const indexList = z.array(z.number().int().nonnegative());
const handedMachine = z
  .object({
    source: z.literal('lstopo'),
    pus: indexList,
    objects: z.partialRecord(
      z.enum(['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'pu']),
      z.array(z.object({ logicalIndex: z.number().int().nonnegative(), osIndex: z.number().int().nonnegative().optional(), pus: indexList }).strict()),
    ),
  })
  .strict();

/** The machine a launcher handed down; anything else in the variable is ETOPOLOGY naming it. */
function readHandedMachine(json: string): MachineTopology {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    value = undefined;
  }
  const parsed = handedMachine.safeParse(value);
  if (!parsed.success) throw new TopocollError('ETOPOLOGY', `${MACHINE_HANDOFF_ENV} does not hold a machine as topocoll run hands it down`);
  return parsed.data;
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
  const handed = env[MACHINE_HANDOFF_ENV];
  if (handed !== undefined && handed !== '') return readHandedMachine(handed);
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
