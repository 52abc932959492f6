import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseHwlocXml, readHwlocXmlFile } from '../../src/topology/hwloc-xml.js';
import type { MachineTopology, ObjectKind } from '../../src/topology/types.js';
import { thrown } from '../helpers/thrown.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/hwloc');
const fixture = (name: string): string => join(FIXTURES, name);
const read = (name: string): string => readFileSync(fixture(name), 'utf8');

function counts(machine: MachineTopology): Partial<Record<ObjectKind, number>> {
  return Object.fromEntries(Object.entries(machine.objects).map(([k, v]) => [k, v.length]));
}

/** 1-based number of the first line of `text` that contains `needle`. */
function lineOf(text: string, needle: string): number {
  const index = text.split('\n').findIndex((l) => l.includes(needle));
  expect(index).toBeGreaterThanOrEqual(0);
  return index + 1;
}

/** Console names lstopo prints for the kinds we keep (`L1` is a unified L1, `L1d` a data one). */
const CONSOLE_KIND: Record<string, ObjectKind> = {
  Package: 'socket',
  L3: 'l3',
  L2: 'l2',
  L1d: 'l1',
  L1: 'l1',
  Core: 'core',
  PU: 'pu',
  NUMANode: 'numa',
};

interface Seen {
  logicalIndex: number;
  osIndex?: number;
  pus: number[];
}

/**
 * What hwloc itself says about a file: every object's logical index (L#), OS index (P#, printed
 * for PUs and NUMA nodes) and cpuset, from lstopo's console output. The cpuset is decoded from
 * taskset format with BigInt, independently of the parser under test.
 */
function lstopoView(file: string): Partial<Record<ObjectKind, Seen[]>> {
  const out = execFileSync('lstopo-no-graphics', ['-i', file, '--of', 'console', '-c', '--taskset', '--no-factorize', '--no-io'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const view: Partial<Record<ObjectKind, Seen[]>> = {};
  for (const line of out.split('\n')) {
    const m = /^\s*(\S+) L#(\d+)(?: \(P#(\d+))?.* cpuset=0x([0-9a-f]+)$/.exec(line);
    const kind = m === null ? undefined : CONSOLE_KIND[m[1]!];
    if (m === null || kind === undefined) continue;
    let bits = BigInt(`0x${m[4]}`);
    const pus: number[] = [];
    for (let i = 0; bits > 0n; i++, bits >>= 1n) if (bits & 1n) pus.push(i);
    const seen: Seen = { logicalIndex: Number(m[2]), pus };
    if (m[3] !== undefined) seen.osIndex = Number(m[3]);
    (view[kind] ??= []).push(seen);
  }
  for (const list of Object.values(view)) list.sort((a, b) => a.logicalIndex - b.logicalIndex);
  return view;
}

/** The parsed machine in the shape of `lstopoView` (OS indices only where lstopo prints them). */
function asSeen(machine: MachineTopology): Partial<Record<ObjectKind, Seen[]>> {
  const view: Partial<Record<ObjectKind, Seen[]>> = {};
  for (const [kind, objects] of Object.entries(machine.objects) as [ObjectKind, Seen[]][]) {
    view[kind] = objects.map(({ logicalIndex, osIndex, pus }) =>
      (kind === 'pu' || kind === 'numa') && osIndex !== undefined ? { logicalIndex, osIndex, pus } : { logicalIndex, pus },
    );
  }
  return view;
}

const V2_FIXTURES = [
  '32em64t-2n8c2t-pci-noio.xml',
  '24em64t-2n6c2t-pci.xml',
  '16amd64-8n2c-cpusets.xml',
  '16em64t-4s2c2t.xml',
  'synthetic-64pu-2pack-2die-l3-l2-2t.xml',
  'synthetic-32pu-2pack-2numa-l3-4c-2t.xml',
  'synthetic-128pu-4pack-2l3-16c.xml',
  'synthetic-8pu-machine-numa-and-package-numa.xml',
];

describe('parseHwlocXml on the fixtures', () => {
  it.each<[string, Partial<Record<ObjectKind, number>>]>([
    // 2 packages × 8 cores × 2 threads, one NUMA node and one L3 per package.
    ['32em64t-2n8c2t-pci-noio.xml', { socket: 2, numa: 2, l3: 2, l2: 16, l1: 16, core: 16, pu: 32 }],
    // 2 packages × 6 cores × 2 threads, PCI and OS devices skipped.
    ['24em64t-2n6c2t-pci.xml', { socket: 2, numa: 2, l3: 2, l2: 12, l1: 12, core: 12, pu: 24 }],
    // 4 packages × 2 cores × 2 threads, one NUMA node.
    ['16em64t-4s2c2t.xml', { socket: 4, numa: 1, l3: 4, l2: 8, l1: 8, core: 8, pu: 16 }],
    ['16em64t-4s2c2t.v3.xml', { socket: 4, numa: 1, l3: 4, l2: 8, l1: 8, core: 8, pu: 16 }],
    // The 8-node × 2-core Opteron as restricted by hwloc's cpuset test: 10 of its 16 PUs and 5 of
    // its 8 NUMA nodes remain (2 of them memory-only), no L3.
    ['16amd64-8n2c-cpusets.xml', { socket: 6, numa: 5, l2: 10, l1: 10, core: 10, pu: 10 }],
    ['synthetic-64pu-2pack-2die-l3-l2-2t.xml', { socket: 2, numa: 4, l3: 8, l2: 32, l1: 32, core: 32, pu: 64 }],
    ['synthetic-32pu-2pack-2numa-l3-4c-2t.xml', { socket: 2, numa: 4, l3: 4, core: 16, pu: 32 }],
    ['synthetic-128pu-4pack-2l3-16c.xml', { socket: 4, numa: 4, l3: 8, core: 128, pu: 128 }],
    ['synthetic-8pu-machine-numa-and-package-numa.xml', { socket: 2, numa: 3, core: 4, pu: 8 }],
  ])('%s has the right number of objects of each kind', (name, expected) => {
    const machine = readHwlocXmlFile(fixture(name));
    expect(counts(machine)).toEqual(expected);
    expect(machine.pus).toHaveLength(expected.pu!);
    expect(machine.source).toBe(`hwloc-xml:${fixture(name)}`);
  });

  it.each(V2_FIXTURES)('%s: logical indices, OS indices and PUs equal what lstopo reports', (name) => {
    expect(asSeen(readHwlocXmlFile(fixture(name)))).toEqual(lstopoView(fixture(name)));
  });

  it('reads the Intel box as the reference describes it', () => {
    const machine = readHwlocXmlFile(fixture('32em64t-2n8c2t-pci-noio.xml'));
    expect(machine.pus).toEqual(Array.from({ length: 32 }, (_, i) => i));
    // Core L#0 has PUs P#0 and P#16, so P#16 is PU L#1 and P#3 is PU L#6.
    expect(machine.objects.core![0]!.pus).toEqual([0, 16]);
    expect(machine.objects.pu![1]).toEqual({ logicalIndex: 1, osIndex: 16, pus: [16] });
    expect(machine.objects.pu![6]).toEqual({ logicalIndex: 6, osIndex: 3, pus: [3] });
    expect(machine.objects.numa!.map((n) => n.osIndex)).toEqual([0, 1]);
  });

  it('numbers a NUMA node attached to the machine after those attached to its packages', () => {
    // The file writes the machine's NUMA node (P#2) first; hwloc numbers it last (L#2).
    const machine = readHwlocXmlFile(fixture('synthetic-8pu-machine-numa-and-package-numa.xml'));
    expect(machine.objects.numa).toEqual([
      { logicalIndex: 0, osIndex: 0, pus: [0, 1, 2, 3] },
      { logicalIndex: 1, osIndex: 1, pus: [4, 5, 6, 7] },
      { logicalIndex: 2, osIndex: 2, pus: [0, 1, 2, 3, 4, 5, 6, 7] },
    ]);
  });

  it('keeps memory-only NUMA nodes with no PUs, and decodes cpusets with empty fields', () => {
    const amd = readHwlocXmlFile(fixture('16amd64-8n2c-cpusets.xml'));
    expect(amd.objects.numa!.map((n) => [n.osIndex, n.pus])).toEqual([
      [1, [2, 3]],
      [2, [5]],
      [3, [6]],
      [5, []],
      [4, []],
    ]);
    const wide = readHwlocXmlFile(fixture('synthetic-128pu-4pack-2l3-16c.xml'));
    expect(wide.objects.socket![2]!.pus).toEqual(Array.from({ length: 32 }, (_, i) => 64 + i));
  });

  it('ignores instruction caches, Die, Group and MemCache levels, and skips I/O and Misc subtrees', () => {
    const xml = `<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003">
    <object type="Group" cpuset="0x00000003" kind="1001">
      <object type="Die" os_index="0" cpuset="0x00000003">
        <object type="MemCache" cpuset="0x00000003" depth="1" cache_type="0">
          <object type="NUMANode" os_index="0" cpuset="0x00000003"/>
        </object>
        <object type="L1Cache" os_index="7" cpuset="0x00000003" depth="1" cache_type="1">
          <object type="L1iCache" os_index="7" cpuset="0x00000003" depth="1" cache_type="2">
            <object type="Core" os_index="0" cpuset="0x00000003">
              <object type="PU" os_index="0" cpuset="0x00000001"/>
              <object type="PU" os_index="1" cpuset="0x00000002"/>
            </object>
          </object>
        </object>
        <object type="Bridge" bridge_type="0-1" depth="0">
          <object type="PCIDev" pci_busid="0000:00:01.0">
            <object type="OSDev" name="eth0" osdev_type="2"/>
          </object>
        </object>
        <object type="Misc" name="note"><object type="Misc" name="inner"/></object>
      </object>
    </object>
  </object>
</topology>
`;
    expect(parseHwlocXml(xml, 'small.xml').objects).toEqual({
      numa: [{ logicalIndex: 0, osIndex: 0, pus: [0, 1] }],
      l1: [{ logicalIndex: 0, osIndex: 7, pus: [0, 1] }],
      core: [{ logicalIndex: 0, osIndex: 0, pus: [0, 1] }],
      pu: [
        { logicalIndex: 0, osIndex: 0, pus: [0] },
        { logicalIndex: 1, osIndex: 1, pus: [1] },
      ],
    });
  });

  it('reads hwloc 3.0 files exactly like the 2.0 export of the same machine', () => {
    const v2 = readHwlocXmlFile(fixture('16em64t-4s2c2t.xml'));
    const v3 = readHwlocXmlFile(fixture('16em64t-4s2c2t.v3.xml'));
    expect(v3.objects).toEqual(v2.objects);
    expect(v3.pus).toEqual(v2.pus);
  });
});

describe('parseHwlocXml errors', () => {
  const intel = read('32em64t-2n8c2t-pci-noio.xml');

  it('reports malformed XML with its line and column', () => {
    const text = '<?xml version="1.0"?>\n<topology version="2.0">\n  <object type="Machine" cpuset="0x1">\n</topology>\n';
    const e = thrown(() => parseHwlocXml(text, 'bad.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toMatch(/^ETOPOLOGY: bad\.xml:4:1: malformed XML: Expected closing tag 'object'/);
  });

  it.each(['', 'not xml at all'])('reports %j as malformed', (text) => {
    const e = thrown(() => parseHwlocXml(text, 'bad.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('bad.xml:1');
    expect(e.message).toContain('malformed XML');
  });

  it('rejects a root element other than <topology>', () => {
    const e = thrown(() => parseHwlocXml('<?xml version="1.0"?>\n<machine version="2.0"/>\n', 'other.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('other.xml:2:1: the root element is <machine>, not <topology>');
  });

  it('rejects hwloc 1.x exports with a hint to re-export', () => {
    const e = thrown(() => readHwlocXmlFile(fixture('synthetic-v1-2pack-2c.xml')));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`${fixture('synthetic-v1-2pack-2c.xml')}:3:`);
    expect(e.message).toContain('hwloc 1.x');
    expect(e.hint).toContain('lstopo-no-graphics --of xml');
  });

  it.each(['Socket', 'Cache'])('rejects the hwloc 1.x type %s where it appears', (type) => {
    const text = intel.replace('type="Package"', `type="${type}"`);
    const e = thrown(() => parseHwlocXml(text, 'old.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.line).toBe(lineOf(text, `type="${type}"`));
    expect(e.message).toContain(`object type "${type}" is from hwloc 1.x`);
    expect(e.hint).toContain('hwloc 2');
  });

  it('rejects an unsupported format version', () => {
    const text = intel.replace('<topology version="2.0">', '<topology version="4.0">');
    const e = thrown(() => parseHwlocXml(text, 'new.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('new.xml:3:1: unsupported hwloc XML version "4.0"');
  });

  it('rejects an unknown object type at its line', () => {
    const text = intel.replace('type="L2Cache"', 'type="L2Cash"');
    const e = thrown(() => parseHwlocXml(text, 'typo.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`typo.xml:${lineOf(text, 'L2Cash')}:`);
    expect(e.message).toContain('unknown hwloc object type "L2Cash"');
  });

  it('rejects a PU without os_index at its line', () => {
    const text = intel.replace('<object type="PU" os_index="16"', '<object type="PU"');
    const line = text.split('\n').findIndex((l) => /<object type="PU" cpuset="0x00010000"/.test(l)) + 1;
    const e = thrown(() => parseHwlocXml(text, 'pu.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(line).toBeGreaterThan(0);
    expect(e.message).toContain(`pu.xml:${line}:`);
    expect(e.message).toContain('PU object has no os_index');
  });

  it('rejects a cpuset that does not parse, quoting it, at its line', () => {
    const text = intel.replace('cpuset="0x00ff00ff"', 'cpuset="0x00ff00fg"');
    const e = thrown(() => parseHwlocXml(text, 'cpuset.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`cpuset.xml:${lineOf(text, '0x00ff00fg')}:`);
    expect(e.message).toContain('invalid cpuset "0x00ff00fg"');
  });

  it('counts lines correctly in files with CRLF line ends', () => {
    const text = intel.replace('type="L2Cache"', 'type="L2Cash"').replaceAll('\n', '\r\n');
    const e = thrown(() => parseHwlocXml(text, 'crlf.xml'));
    expect(e.line).toBe(lineOf(text, 'L2Cash'));
  });

  it('names the path of a file that does not exist', () => {
    const e = thrown(() => readHwlocXmlFile('/nonexistent/machine.xml'));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('/nonexistent/machine.xml');
    expect(e.message).toContain('no such file');
  });
});
