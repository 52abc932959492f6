import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { discoverMachine, MACHINE_HANDOFF_ENV, machineHandoff } from '../../src/topology/discover.js';
import { readHwlocXmlFile } from '../../src/topology/hwloc-xml.js';
import { sysfsFilesOf, tmpRoot, writeTree } from './fake-sysfs.js';
import { thrown } from '../helpers/thrown.js';

const fixture = (name: string): string => join(import.meta.dirname, '../fixtures/hwloc', name);
const INTEL = fixture('32em64t-2n8c2t-pci-noio.xml');
const AMD = fixture('16em64t-4s2c2t.xml');

const roots: string[] = [];
/** A sysfs tree of a small machine (the 8-PU synthetic fixture) that lstopo never sees. */
function fakeSysfs(): string {
  const root = writeTree(tmpRoot(), sysfsFilesOf(readHwlocXmlFile(fixture('synthetic-8pu-machine-numa-and-package-numa.xml'))));
  roots.push(root);
  return root;
}
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

const envWithout = (name: string): NodeJS.ProcessEnv => Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== name));

describe('discoverMachine', () => {
  it('uses an explicit hwloc XML file first, even when HWLOC_XMLFILE is set', () => {
    const machine = discoverMachine({ hwlocXml: INTEL, env: { HWLOC_XMLFILE: AMD } });
    expect(machine.source).toBe(`hwloc-xml:${INTEL}`);
    expect(machine.objects.core).toHaveLength(16);
  });

  it('uses HWLOC_XMLFILE next and records it', () => {
    const machine = discoverMachine({ env: { HWLOC_XMLFILE: AMD }, sysfsRoot: fakeSysfs() });
    expect(machine.source).toBe(`HWLOC_XMLFILE:${AMD}`);
    expect(machine.objects.socket).toHaveLength(4);
  });

  it('fails, naming the file, when HWLOC_XMLFILE points nowhere', () => {
    const e = thrown(() => discoverMachine({ env: { HWLOC_XMLFILE: '/nonexistent/topo.xml' }, sysfsRoot: fakeSysfs() }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('/nonexistent/topo.xml');
  });

  it('rejects an empty path', () => {
    expect(thrown(() => discoverMachine({ hwlocXml: '' })).code).toBe('EINVAL');
  });

  it('runs lstopo-no-graphics next, in the given environment', () => {
    // hwloc honours HWLOC_SYNTHETIC, so the result shows that lstopo ran with this environment.
    const env = { ...envWithout('HWLOC_XMLFILE'), HWLOC_SYNTHETIC: 'pack:3 core:2 pu:2' };
    const machine = discoverMachine({ env, sysfsRoot: fakeSysfs() });
    expect(machine.source).toBe('lstopo');
    expect(machine.objects.socket).toHaveLength(3);
    expect(machine.objects.core).toHaveLength(6);
    expect(machine.pus).toHaveLength(12);
  });

  it("takes the machine the launcher got from lstopo where it would run lstopo, and hands on only lstopo's", () => {
    const printed = discoverMachine({ env: { ...envWithout('HWLOC_XMLFILE'), HWLOC_SYNTHETIC: 'pack:3 core:2 pu:2' } });
    expect(printed.objects.socket).toHaveLength(3);
    expect(printed.source).toBe('lstopo');
    // No lstopo on PATH: the machine can only come from what was handed down.
    const handed = { PATH: '/nonexistent', [MACHINE_HANDOFF_ENV]: machineHandoff(printed)! };
    const machine = discoverMachine({ env: handed, sysfsRoot: fakeSysfs() });
    expect(machine).toEqual(printed);
    // A rank that got it hands it on as it got it (a job started from a rank).
    expect(JSON.parse(machineHandoff(machine)!)).toEqual(printed);
    // The order of sources holds: a file and HWLOC_XMLFILE still win, sysfs is still sysfs.
    expect(discoverMachine({ env: { ...handed, HWLOC_XMLFILE: AMD } }).objects.socket).toHaveLength(4);
    expect(discoverMachine({ env: handed, hwlocXml: INTEL }).objects.core).toHaveLength(16);
    expect(discoverMachine({ env: handed, source: 'sysfs', sysfsRoot: fakeSysfs() }).source).toBe('sysfs');
    // A machine from a file or sysfs is not handed down (the ranks read the same source).
    expect(machineHandoff(discoverMachine({ hwlocXml: INTEL }))).toBeUndefined();
    // Anything else in the variable is an error naming it.
    for (const bad of ['<topology', '{"source":"lstopo","pus":[0],"objects":{"core":[{"pus":[0]}]}}', '{"source":"sysfs","pus":[],"objects":{}}']) {
      const e = thrown(() => discoverMachine({ env: { PATH: '/nonexistent', [MACHINE_HANDOFF_ENV]: bad } }));
      expect(e.code).toBe('ETOPOLOGY');
      expect(e.message).toMatch(MACHINE_HANDOFF_ENV);
    }
  });

  it('falls back to sysfs when lstopo is not installed', () => {
    const machine = discoverMachine({ env: { PATH: '/nonexistent' }, sysfsRoot: fakeSysfs() });
    expect(machine.source).toBe('sysfs');
    expect(machine.objects.socket).toHaveLength(2);
    expect(machine.pus).toHaveLength(8);
  });

  it('requires the forced source: hwloc-xml needs a file, lstopo needs lstopo', () => {
    expect(thrown(() => discoverMachine({ env: {}, source: 'hwloc-xml' }), 'ECONFIG').message).toMatch(/no file is given/);
    expect(thrown(() => discoverMachine({ env: { PATH: '/nonexistent' }, source: 'lstopo' }), 'ETOPOLOGY').message).toMatch(
      /lstopo-no-graphics is not installed/,
    );
    const forced = discoverMachine({ env: { ...envWithout('HWLOC_XMLFILE'), HWLOC_SYNTHETIC: 'pack:3 core:2 pu:2' }, hwlocXml: INTEL, source: 'lstopo' });
    expect(forced.source).toBe('lstopo');
    expect(forced.objects.socket).toHaveLength(3);
  });

  it('reads sysfs directly when the source is sysfs', () => {
    const machine = discoverMachine({
      env: { ...envWithout('HWLOC_XMLFILE'), HWLOC_SYNTHETIC: 'pack:3 core:2 pu:2' },
      source: 'sysfs',
      sysfsRoot: fakeSysfs(),
    });
    expect(machine.source).toBe('sysfs');
    expect(machine.objects.core).toHaveLength(4);
  });
});
