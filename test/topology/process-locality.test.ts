import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readHwlocXmlFile } from '../../src/topology/hwloc-xml.js';
import { parseIndexList } from '../../src/topology/index-list.js';
import { formatLocality } from '../../src/topology/locality-string.js';
import { computeLocality } from '../../src/topology/process-locality.js';
import type { LocalityToken } from '../../src/topology/types.js';
import { thrown } from '../helpers/thrown.js';

const fixture = (name: string): string => join(import.meta.dirname, '../fixtures/hwloc', name);
const INTEL = fixture('32em64t-2n8c2t-pci-noio.xml');
const SYNTHETIC = fixture('synthetic-64pu-2pack-2die-l3-l2-2t.xml');

describe('computeLocality reproduces the PMIx generator', () => {
  // Reference §1.2 and §5.1: libpmix 4.2.2's PMIx_server_generate_locality_string on these files.
  it.each([
    [INTEL, '0', 'SK0:L30:L20:L10:CR0:HT0:NM0', true],
    [INTEL, '0,16', 'SK0:L30:L20:L10:CR0:HT0-1:NM0', true],
    [INTEL, '1,17', 'SK0:L30:L21:L11:CR1:HT2-3:NM0', true],
    [INTEL, '3', 'SK0:L30:L23:L13:CR3:HT6:NM0', true],
    [INTEL, '0,2', 'SK0:L30:L20,2:L10,2:CR0,2:HT0,4:NM0', true],
    [INTEL, '0,8', 'SK0-1:L30-1:L20,8:L10,8:CR0,8:HT0,16:NM0-1', true],
    [INTEL, '8-15,24-31', 'SK1:L31:L28-15:L18-15:CR8-15:HT16-31:NM1', true],
    [INTEL, '0-31', 'SK0-1:L30-1:L20-15:L10-15:CR0-15:HT0-31:NM0-1', false],
    [INTEL, '0-7,16-23', 'SK0:L30:L20-7:L10-7:CR0-7:HT0-15:NM0', true],
    [SYNTHETIC, '16-17', 'SK0:L32:L28:L18:CR8:HT16-17:NM1', true],
    [SYNTHETIC, '32-47', 'SK1:L34-5:L216-23:L116-23:CR16-23:HT32-47:NM2', true],
  ])('%s, cpus %s → %s', (file, cpus, expected, bound) => {
    const result = computeLocality(readHwlocXmlFile(file), parseIndexList(cpus));
    expect(formatLocality(result.locality)).toBe(expected);
    expect(result.bound).toBe(bound);
  });

  it('accepts the CPUs in any order and with repeats', () => {
    const machine = readHwlocXmlFile(INTEL);
    expect(formatLocality(computeLocality(machine, [16, 0, 16]).locality)).toBe('SK0:L30:L20:L10:CR0:HT0-1:NM0');
  });

  it('omits a kind none of whose objects hold the CPUs, as PMIx does', () => {
    // In this restricted Opteron, package 0 has no NUMA node left, and the machine has no L3.
    const machine = readHwlocXmlFile(fixture('16amd64-8n2c-cpusets.xml'));
    expect(formatLocality(computeLocality(machine, [0]).locality)).toBe('SK0:L20:L10:CR0:HT0');
    expect(formatLocality(computeLocality(machine, [2]).locality)).toBe('SK1:L22:L12:CR2:HT2:NM0');
  });

  const CALC_TYPES: [LocalityToken['code'], string][] = [
    ['SK', 'Package'],
    ['L3', 'L3Cache'],
    ['L2', 'L2Cache'],
    ['L1', 'L1Cache'],
    ['CR', 'Core'],
    ['HT', 'PU'],
    ['NM', 'NUMANode'],
  ];

  /** `hwloc-calc -I <type>`: the logical indices of the objects intersecting the CPUs (§2.3). */
  function hwlocCalcTokens(file: string, cpus: number[]): LocalityToken[] {
    const tokens: LocalityToken[] = [];
    for (const [code, type] of CALC_TYPES) {
      let out = '';
      try {
        const args = ['-i', file, '--pi', '-I', type, ...cpus.map((c) => `pu:${c}`)];
        out = execFileSync('hwloc-calc', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      } catch {
        // The type does not exist in this topology.
      }
      if (out !== '') tokens.push({ code, indices: out.split(',').map(Number) });
    }
    return tokens;
  }

  it.each([
    '32em64t-2n8c2t-pci-noio.xml',
    '24em64t-2n6c2t-pci.xml',
    '16amd64-8n2c-cpusets.xml',
    '16em64t-4s2c2t.xml',
    'synthetic-32pu-2pack-2numa-l3-4c-2t.xml',
    'synthetic-128pu-4pack-2l3-16c.xml',
    'synthetic-8pu-machine-numa-and-package-numa.xml',
  ])('%s: every token equals hwloc-calc -I for a few CPU sets', (name) => {
    const machine = readHwlocXmlFile(fixture(name));
    const pus = machine.pus;
    const lastSocket = machine.objects.socket!.at(-1)!;
    const cpuSets = [[pus[0]!], machine.objects.core![1]!.pus, [pus[1]!, pus.at(-1)!], lastSocket.pus];
    for (const cpus of cpuSets) {
      expect(computeLocality(machine, cpus).locality.tokens, `cpus ${cpus.join(',')}`).toEqual(hwlocCalcTokens(fixture(name), cpus));
    }
  });
});

describe('computeLocality errors', () => {
  const machine = readHwlocXmlFile(INTEL);

  it('names the CPUs that are not in the machine', () => {
    const e = thrown(() => computeLocality(machine, [0, 40, 99, 41]));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('PU numbers outside the machine: 40-41,99');
    expect(e.hint).toContain(`hwloc-xml:${INTEL}`);
  });

  it('rejects an empty CPU set', () => {
    expect(thrown(() => computeLocality(machine, [])).code).toBe('EINVAL');
  });

  it('names PUs the machine lacks inside its numbering range', () => {
    const amd = readHwlocXmlFile(fixture('16amd64-8n2c-cpusets.xml'));
    expect(thrown(() => computeLocality(amd, [4, 5])).message).toContain('PU numbers outside the machine: 4');
  });
});
