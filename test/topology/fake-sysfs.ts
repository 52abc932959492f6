import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { formatIndexList } from '../../src/topology/index-list.js';
import type { MachineTopology, ObjectKind } from '../../src/topology/types.js';

/** Writes `files` (paths relative to `root`, contents as the kernel prints them) under a root. */
export function writeTree(root: string, files: Record<string, string>): string {
  for (const [path, content] of Object.entries(files)) {
    const full = join(root, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, content);
  }
  return root;
}

export function tmpRoot(): string {
  return mkdtempSync(join(tmpdir(), 'topocoll-sysfs-'));
}

const CPU = 'sys/devices/system/cpu';
const NODE = 'sys/devices/system/node';

/**
 * The sysfs files Linux would show for a machine: per CPU its package, core siblings and
 * caches (plus an L1 instruction cache, which must be ignored), per NUMA node its CPUs. The
 * CPUs are written in OS order, so a reader has to recover hwloc's logical order itself.
 */
export function sysfsFilesOf(machine: MachineTopology): Record<string, string> {
  const files: Record<string, string> = { [`${CPU}/online`]: `${formatIndexList(machine.pus)}\n` };
  const holding = (kind: ObjectKind, pu: number) => machine.objects[kind]?.find((o) => o.pus.includes(pu));
  for (const pu of machine.pus) {
    const dir = `${CPU}/cpu${pu}`;
    const pkg = holding('socket', pu);
    if (pkg !== undefined) files[`${dir}/topology/physical_package_id`] = `${pkg.osIndex ?? -1}\n`;
    const core = holding('core', pu);
    if (core !== undefined) {
      files[`${dir}/topology/core_cpus_list`] = `${formatIndexList(core.pus)}\n`;
      if (core.osIndex !== undefined) files[`${dir}/topology/core_id`] = `${core.osIndex}\n`;
    }
    let index = 0;
    const cache = (level: number, type: string, object: { osIndex?: number; pus: number[] } | undefined) => {
      if (object === undefined) return;
      const base = `${dir}/cache/index${index++}`;
      files[`${base}/level`] = `${level}\n`;
      files[`${base}/type`] = `${type}\n`;
      files[`${base}/shared_cpu_list`] = `${formatIndexList(object.pus)}\n`;
      if (object.osIndex !== undefined) files[`${base}/id`] = `${object.osIndex}\n`;
    };
    cache(1, 'Data', holding('l1', pu));
    // Shared differently from the data cache, so a reader that took it for L1 would show it.
    cache(1, 'Instruction', { pus: machine.pus });
    cache(2, 'Unified', holding('l2', pu));
    cache(3, 'Unified', holding('l3', pu));
  }
  for (const node of machine.objects.numa ?? []) {
    files[`${NODE}/node${node.osIndex}/cpulist`] = `${formatIndexList(node.pus)}\n`;
  }
  return files;
}
