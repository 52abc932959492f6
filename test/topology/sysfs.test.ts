import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseHwlocXml, readHwlocXmlFile } from '../../src/topology/hwloc-xml.js';
import { formatLocality } from '../../src/topology/locality-string.js';
import { computeLocality } from '../../src/topology/process-locality.js';
import { lastLevelCacheBytes, readSysfsTopology } from '../../src/topology/sysfs.js';
import { sysfsFilesOf, tmpRoot, writeTree } from './fake-sysfs.js';
import { thrown } from '../helpers/thrown.js';

const CPU = 'sys/devices/system/cpu';
const NODE = 'sys/devices/system/node';

const roots: string[] = [];
function fakeRoot(files: Record<string, string>): string {
  const root = writeTree(tmpRoot(), files);
  roots.push(root);
  return root;
}
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/**
 * 2 packages × 2 cores × 2 threads with Intel-style numbering (the threads of a core are
 * N and N+4), package ids that do not follow the CPU order, per-core L1d/L1i/L2, an L3 per
 * package, two NUMA nodes plus a memory-only one, and an offline CPU 8.
 */
function twoPackageFiles(): Record<string, string> {
  const files: Record<string, string> = {
    [`${CPU}/online`]: '0-7\n',
    [`${CPU}/possible`]: '0-15\n',
    [`${CPU}/cpu8/topology/physical_package_id`]: 'offline CPUs are never read\n',
    [`${NODE}/online`]: '0-2\n',
    [`${NODE}/node0/cpulist`]: '0-1,4-5\n',
    [`${NODE}/node1/cpulist`]: '2-3,6-7\n',
    [`${NODE}/node2/cpulist`]: '\n',
  };
  for (let cpu = 0; cpu < 8; cpu++) {
    const core = cpu % 4;
    const pkg = core < 2 ? 0 : 1;
    const siblings = `${core},${core + 4}`;
    const dir = `${CPU}/cpu${cpu}`;
    files[`${dir}/topology/physical_package_id`] = pkg === 0 ? '3\n' : '0\n';
    files[`${dir}/topology/core_id`] = `${core % 2}\n`;
    // Package 1 looks like an older kernel, without core_cpus_list.
    files[`${dir}/topology/${pkg === 0 ? 'core_cpus_list' : 'thread_siblings_list'}`] = `${siblings}\n`;
    const caches: [string, string, string, string][] = [
      ['1', 'Data', siblings, `${core}`],
      ['1', 'Instruction', `${cpu}`, `${cpu}`],
      ['2', 'Unified', siblings, `${core}`],
      // The ABI documentation's list style, with a space after the comma.
      ['3', 'Unified', pkg === 0 ? '0-1, 4-5' : '2-3,6-7', pkg === 0 ? '1' : '0'],
    ];
    caches.forEach(([level, type, shared, id], k) => {
      files[`${dir}/cache/index${k}/level`] = `${level}\n`;
      files[`${dir}/cache/index${k}/type`] = `${type}\n`;
      files[`${dir}/cache/index${k}/shared_cpu_list`] = `${shared}\n`;
      files[`${dir}/cache/index${k}/id`] = `${id}\n`;
    });
  }
  return files;
}

describe('readSysfsTopology on a fake tree', () => {
  it('numbers every level as hwloc does', () => {
    const machine = readSysfsTopology(fakeRoot(twoPackageFiles()));
    expect(machine.source).toBe('sysfs');
    expect(machine.pus).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const perCore = (ids: boolean) =>
      [
        [0, 4],
        [1, 5],
        [2, 6],
        [3, 7],
      ].map((pus, i) => ({ logicalIndex: i, osIndex: ids ? i : i % 2, pus }));
    expect(machine.objects).toEqual({
      socket: [
        { logicalIndex: 0, osIndex: 3, pus: [0, 1, 4, 5] },
        { logicalIndex: 1, osIndex: 0, pus: [2, 3, 6, 7] },
      ],
      l3: [
        { logicalIndex: 0, osIndex: 1, pus: [0, 1, 4, 5] },
        { logicalIndex: 1, osIndex: 0, pus: [2, 3, 6, 7] },
      ],
      l2: perCore(true),
      l1: perCore(true),
      core: perCore(false),
      // Depth-first: the two threads of core 0 are PUs L#0 and L#1.
      pu: [0, 4, 1, 5, 2, 6, 3, 7].map((os, i) => ({ logicalIndex: i, osIndex: os, pus: [os] })),
      numa: [
        { logicalIndex: 0, osIndex: 0, pus: [0, 1, 4, 5] },
        { logicalIndex: 1, osIndex: 1, pus: [2, 3, 6, 7] },
        { logicalIndex: 2, osIndex: 2, pus: [] },
      ],
    });
  });

  it('gives the locality PMIx would print for it', () => {
    const machine = readSysfsTopology(fakeRoot(twoPackageFiles()));
    expect(formatLocality(computeLocality(machine, [4]).locality)).toBe('SK0:L30:L20:L10:CR0:HT1:NM0');
    expect(formatLocality(computeLocality(machine, [1, 2]).locality)).toBe('SK0-1:L30-1:L21-2:L11-2:CR1-2:HT2,4:NM0-1');
  });

  it('assumes one NUMA node holding every PU when the kernel has no node directory', () => {
    const files = Object.fromEntries(Object.entries(twoPackageFiles()).filter(([path]) => !path.startsWith(NODE)));
    const machine = readSysfsTopology(fakeRoot(files));
    expect(machine.objects.numa).toEqual([{ logicalIndex: 0, osIndex: 0, pus: [0, 1, 2, 3, 4, 5, 6, 7] }]);
  });

  it('leaves out kinds the tree does not describe', () => {
    const machine = readSysfsTopology(fakeRoot({ [`${CPU}/online`]: '0-1\n' }));
    expect(machine.objects).toEqual({
      pu: [
        { logicalIndex: 0, osIndex: 0, pus: [0] },
        { logicalIndex: 1, osIndex: 1, pus: [1] },
      ],
      numa: [{ logicalIndex: 0, osIndex: 0, pus: [0, 1] }],
    });
  });
});

describe('readSysfsTopology errors', () => {
  it('names the missing online file and suggests an XML file', () => {
    const root = fakeRoot({ 'sys/devices/system/cpu/cpu0/topology/core_id': '0\n' });
    const e = thrown(() => readSysfsTopology(root));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(join(root, CPU, 'online'));
    expect(e.hint).toContain('hwloc XML');
  });

  it('names a list file that does not parse', () => {
    const files = twoPackageFiles();
    files[`${NODE}/node1/cpulist`] = '2-3,6-x\n';
    const root = fakeRoot(files);
    const e = thrown(() => readSysfsTopology(root));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`${join(root, NODE, 'node1/cpulist')}: invalid index list "2-3,6-x"`);
  });

  it('names an integer file that does not parse', () => {
    const files = twoPackageFiles();
    files[`${CPU}/cpu5/topology/physical_package_id`] = 'zero\n';
    const root = fakeRoot(files);
    const e = thrown(() => readSysfsTopology(root));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`${join(root, CPU, 'cpu5/topology/physical_package_id')}: expected an integer, found "zero"`);
  });
});

describe('readSysfsTopology reproduces hwloc', () => {
  // The sysfs files these machines would show, written in OS order; hwloc's own numbering is
  // the one recorded in the XML. (16amd64-8n2c-cpusets is left out: its memory-only NUMA nodes
  // sit under Groups in an order Linux sysfs cannot express.)
  it.each([
    '32em64t-2n8c2t-pci-noio.xml',
    '24em64t-2n6c2t-pci.xml',
    '16em64t-4s2c2t.xml',
    'synthetic-64pu-2pack-2die-l3-l2-2t.xml',
    'synthetic-32pu-2pack-2numa-l3-4c-2t.xml',
    'synthetic-8pu-machine-numa-and-package-numa.xml',
  ])('from the sysfs files of %s', (name) => {
    const hwloc = readHwlocXmlFile(join(import.meta.dirname, '../fixtures/hwloc', name));
    const machine = readSysfsTopology(fakeRoot(sysfsFilesOf(hwloc)));
    expect(machine.objects).toEqual(hwloc.objects);
    expect(machine.pus).toEqual(hwloc.pus);
  });

  it('on this machine, as lstopo-no-graphics sees it', () => {
    // --whole-system: sysfs lists every online CPU, including those a cgroup disallows.
    // HWLOC_COMPONENTS=-x86: hwloc's Linux backend alone, which reads the same sysfs files. Its
    // x86 backend adds caches from CPUID, which a kernel may not export to sysfs at all (some
    // VMs have no cpu*/cache directories), and the sysfs reader cannot see those.
    const xml = execFileSync('lstopo-no-graphics', ['--of', 'xml', '--no-io', '--whole-system'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, HWLOC_COMPONENTS: '-x86' },
    });
    const hwloc = parseHwlocXml(xml, 'lstopo');
    const machine = readSysfsTopology('/');
    expect(machine.pus).toEqual(hwloc.pus);
    expect(Object.keys(machine.objects).sort()).toEqual(Object.keys(hwloc.objects).sort());
    for (const [kind, objects] of Object.entries(hwloc.objects)) {
      const pusOf = (list: { pus: number[] }[]) => list.map((o) => o.pus);
      expect(pusOf(machine.objects[kind as keyof typeof machine.objects]!), kind).toEqual(pusOf(objects));
    }
    expect(machine.objects.pu!.map((o) => o.osIndex)).toEqual(hwloc.objects.pu!.map((o) => o.osIndex));
    expect(machine.objects.numa!.map((o) => o.osIndex)).toEqual(hwloc.objects.numa!.map((o) => o.osIndex));
  });
});

describe('lastLevelCacheBytes', () => {
  it('reads the largest cache of CPU 0 with its unit', () => {
    const root = fakeRoot({
      [`${CPU}/cpu0/cache/index0/size`]: '32K\n',
      [`${CPU}/cpu0/cache/index2/size`]: '1024K\n',
      [`${CPU}/cpu0/cache/index3/size`]: '32M\n',
      [`${CPU}/cpu0/cache/uevent`]: '',
    });
    expect(lastLevelCacheBytes(root)).toBe(32 << 20);
  });

  it('is undefined when sysfs has no cache sizes', () => {
    expect(lastLevelCacheBytes(fakeRoot({ [`${CPU}/cpu0/online`]: '1\n' }))).toBeUndefined();
  });
});
