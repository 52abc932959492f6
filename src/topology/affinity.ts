import { TopocollError, type ErrorLocation } from '../errors.js';
import { parseIndexList } from './index-list.js';
import { readTextFile } from '../util/read-text-file.js';
import { lines } from '../util/lines.js';

/**
 * The PUs this process may run on. Node.js has no `sched_getaffinity` binding
 * (`os.availableParallelism()` gives only the count), so the set comes from the kernel's
 * `Cpus_allowed_list` line in `/proc/self/status`, which reflects taskset, cgroups and
 * launcher binding alike.
 */

const STATUS_PATH = '/proc/self/status';
const FIELD = 'Cpus_allowed_list:';

/** Extracts the `Cpus_allowed_list:` set from the text of a `/proc/<pid>/status` file. */
export function parseAffinityFromStatus(statusText: string, where: ErrorLocation = {}): number[] {
  for (const [line, number] of lines(statusText, where.file)) {
    if (!line.startsWith(FIELD)) continue;
    const at = { ...where, line: number };
    const cpus = parseIndexList(line.slice(FIELD.length).trim(), at);
    if (cpus.length === 0) throw new TopocollError('ETOPOLOGY', 'Cpus_allowed_list is empty', at);
    return cpus;
  }
  throw new TopocollError('ETOPOLOGY', `no "${FIELD}" line in the process status`, {
    ...where,
    hint: 'The kernel has reported it since Linux 2.6.26; on other systems give the locality explicitly (TOPOCOLL_LOCALITY).',
  });
}

/** The affinity of the calling process, from `/proc/self/status` (Linux only). */
export function readProcessAffinity(): number[] {
  const hint = 'Affinity is read from Linux procfs; on other systems give the locality explicitly (TOPOCOLL_LOCALITY).';
  return parseAffinityFromStatus(readTextFile(STATUS_PATH, 'ETOPOLOGY', 'process affinity', hint), { file: STATUS_PATH });
}
