import { describe, expect, it } from 'vitest';
import { parseLocalitiesFile } from '../../src/topology/localities-file.js';
import { cli, exampleMachine, fixture } from './helpers.js';

/** The example machine: 2 packages × 18 cores, one NUMA node and one L3 per package. */
const coreLoc = (c: number) => {
  const s = Math.floor(c / 18);
  return `SK${s}:L3${s}:L2${c}:L1${c}:CR${c}:HT${c}:NM${s}`;
};

async function localities(args: string[]) {
  const r = await cli(['localities', '--hwloc-xml', exampleMachine, ...args]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return parseLocalitiesFile(r.stdout, 'stdout');
}

describe('topocoll localities', () => {
  it('fills nodes in order and maps local rank j to core j with --map-by core', async () => {
    const lines = await localities(['--nodes', 'n[1-3]', '--ppn', '20', '--map-by', 'core']);
    expect(lines).toHaveLength(60);
    for (const p of lines) {
      expect(p.node).toBe(`n${Math.floor(p.rank / 20) + 1}`);
      expect(p.locality).toBe(coreLoc(p.rank % 20));
    }
  });

  it('alternates sockets with --map-by socket, taking the next free core of each', async () => {
    const lines = await localities(['--nodes', 'a', '--ppn', '5', '--map-by', 'socket']);
    expect(lines.map((p) => p.locality)).toEqual([0, 18, 1, 19, 2].map(coreLoc));
  });

  it('skips memory-only NUMA nodes and full units for the next unit with a free core', async () => {
    // A restricted AMD machine: NUMA nodes 0-2 hold PUs {2,3}, {5}, {6}; NUMA nodes 3 and 4 are
    // memory-only (empty cpuset); the other cores belong to no allowed NUMA node.
    const args = ['localities', '--hwloc-xml', fixture('16amd64-8n2c-cpusets.xml'), '--nodes', 'a', '--map-by', 'numa'];
    const r = await cli([...args, '--ppn', '4']);
    expect(r.stderr).toBe('');
    const pus = parseLocalitiesFile(r.stdout, 'x').map((p) => /NM(\d+)/.exec(p.locality!)![1] + '/' + /CR(\d+)/.exec(p.locality!)![1]);
    // rank 3 → NUMA 3 (memory-only) → 4 (memory-only) → NUMA 0, its second core.
    expect(pus).toEqual(['0/2', '1/4', '2/5', '0/3']);
    const full = await cli([...args, '--ppn', '5']);
    expect(full.stderr).toMatch(/EINVAL: --map-by numa: no free core left for local rank 4: only 4 of the 10 cores lie in a numa unit/);
  });

  it('binds to the whole package with --bind-to socket and to everything with none', async () => {
    const socket = await localities(['--nodes', 'a', '--ppn', '2', '--map-by', 'socket', '--bind-to', 'socket']);
    expect(socket[1]!.locality).toBe('SK1:L31:L218-35:L118-35:CR18-35:HT18-35:NM1');
    const none = await localities(['--nodes', 'a', '--ppn', '1', '--map-by', 'core', '--bind-to', 'none']);
    expect(none[0]!.locality).toBe('SK0-1:L30-1:L20-35:L10-35:CR0-35:HT0-35:NM0-1');
  });

  it('refuses more ranks per node than cores', async () => {
    const r = await cli(['localities', '--hwloc-xml', exampleMachine, '--nodes', 'a', '--ppn', '37', '--map-by', 'core']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/EINVAL: --ppn 37 is larger than the 36 cores/);
  });

  it('names the missing options, bad values and hostlist errors', async () => {
    expect((await cli(['localities', '--nodes', 'a'])).stderr).toMatch(/EINVAL: .*missing --hwloc-xml, --ppn, --map-by/);
    expect((await cli(['localities', '--hwloc-xml', exampleMachine, '--nodes', 'a', '--ppn', '2', '--map-by', 'l3'])).stderr).toMatch(
      /--map-by must be one of core, numa, socket/,
    );
    expect((await cli(['localities', '--hwloc-xml', exampleMachine, '--nodes', 'n[3-1]', '--ppn', '2', '--map-by', 'core'])).stderr).toMatch(/ETOPOLOGY/);
    expect((await cli(['localities', '--bogus'])).stderr).toBe(
      'topocoll localities: EINVAL: unknown option --bogus. Run "topocoll localities --help" for the options.\n',
    );
  });
});
