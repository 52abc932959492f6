import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GroupPlanJson } from '../../src/groups/plan-json.js';
import { tempDir } from '../helpers/temp.js';
import { cli, exampleMachine, exampleNetwork } from './helpers.js';

const range = (from: number, to: number, step = 1) => Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step);
const seedJob = ['--hwloc-xml', exampleMachine, '--nodes', 'node[01-64]', '--ppn', '36', '--map-by', 'core', '--network', exampleNetwork];

function tmpFile(name: string, text: string): string {
  const dir = tempDir('topocoll-cli-');
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe('topocoll groups', () => {
  it('reproduces the seed example from the example machine and network file (JSON)', async () => {
    const r = await cli(['groups', ...seedJob, '--json']);
    expect(r.stderr).toBe('');
    const plan = JSON.parse(r.stdout) as GroupPlanJson;
    expect(plan.levels).toEqual(['socket', 'node', 'switch1', 'switch2']);
    expect(plan.ranks).toHaveLength(2304);
    const members = (rank: number) => plan.ranks[rank]!.groups.map((g) => g.members);
    expect(members(0)).toEqual([range(0, 17), [0, 18], range(0, 540, 36), [0, 576, 1152, 1728]]);
    expect(members(1)).toEqual([range(0, 17)]);
    expect(members(36)).toEqual([range(36, 53), [36, 54], range(0, 540, 36)]);
    expect(members(54)).toEqual([range(54, 71), [36, 54]]);
    expect(plan.dropped.filter((d) => d.node === 'node01').map((d) => d.level)).toEqual(['core', 'l1', 'l2', 'l3', 'numa']);
  });

  it('prints a level table and a rank chain for people', async () => {
    const r = await cli(['groups', ...seedJob, '--rank', '36']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^2304 ranks on 64 node\(s\); network: simple:/);
    expect(r.stdout).toMatch(/^socket\s+128\s+18\s+0,18,36,.*\s+shm\s+binomial\s+recursive-doubling 3\.88 \/ ring 1\.89$/m);
    // Between nodes the algorithm follows the message size (groups of 16: scatter-allgather and Rabenseifner for large ones).
    expect(r.stdout).toMatch(
      /^switch1\s+4\s+16\s+0,576,1152,1728\s+binomial \/ scatter-allgather\s+binomial \/ rabenseifner\s+recursive-doubling 3\.75 \/ ring 1\.88$/m,
    );
    expect(r.stdout).toMatch(/^switch2\s+1\s+4\s+0\s+binomial \/ scatter-allgather\s+binomial \/ rabenseifner\s+recursive-doubling 1\.50 \/ ring 1\.50$/m);
    expect(r.stdout).toMatch(
      /^allreduce: reduce-allreduce-bcast, top group recursive-doubling \(small\); reduce-allreduce-bcast, top group rabenseifner \(large\)/m,
    );
    expect(r.stdout).toMatch(/numa: same groups as socket — on node\[01-64\]/);
    expect(r.stdout).toMatch(/rank 36 on node02/);
    expect(r.stdout).toMatch(/switch1\s+sw11: 16 members \(0,36,72,108,144,180,…,540\), leader 0/);
  });

  it('reads a localities file and disables levels from --disable and --config', async () => {
    const loc = await cli(['localities', '--hwloc-xml', exampleMachine, '--nodes', 'a,b', '--ppn', '4', '--map-by', 'socket']);
    const file = tmpFile('job.loc', loc.stdout);
    const socketOn = JSON.parse((await cli(['groups', '--localities', file, '--json'])).stdout) as GroupPlanJson;
    expect(socketOn.levels).toEqual(['socket', 'node', 'world']);
    // map-by socket: local ranks 0,2 on socket 0 and 1,3 on socket 1.
    expect(socketOn.ranks[0]!.groups.map((g) => g.members)).toEqual([
      [0, 2],
      [0, 1],
      [0, 4],
    ]);
    // With socket off, numa (same partition here) takes its place; with all three off, none.
    const socketOff = JSON.parse((await cli(['groups', '--localities', file, '--disable', 'socket', '--json'])).stdout) as GroupPlanJson;
    expect(socketOff.levels).toEqual(['numa', 'node', 'world']);
    const off = JSON.parse((await cli(['groups', '--localities', file, '--disable', 'socket,numa,l3', '--json'])).stdout) as GroupPlanJson;
    expect(off.ranks[0]!.groups.map((g) => g.members)).toEqual([
      [0, 1, 2, 3],
      [0, 4],
    ]);
    const config = tmpFile('c.yaml', 'levels:\n  socket: { enabled: false }\n  numa: { enabled: false }\n  l3: { enabled: false }\n');
    const viaConfig = JSON.parse((await cli(['groups', '--localities', file, '--config', config, '--json'])).stdout) as GroupPlanJson;
    expect(viaConfig.ranks[0]!.groups.map((g) => g.members)).toEqual([
      [0, 1, 2, 3],
      [0, 4],
    ]);
  });

  it('warns once per level and reason about levels that do not nest', async () => {
    const lines = ['a', 'b'].flatMap((node, n) =>
      ['SK0:L30:L20:L10:CR0:HT0:NM0', 'SK0:L31:L21:L11:CR1:HT1:NM0', 'SK1:L31:L22:L12:CR2:HT2:NM1', 'SK1:L32:L23:L13:CR3:HT3:NM1'].map(
        (loc, j) => `${n * 4 + j} ${node} ${loc}`,
      ),
    );
    const r = await cli(['groups', '--localities', tmpFile('odd.loc', lines.join('\n'))]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('topocoll: warning: l3: its groups do not nest with those of numa — on a,b\n');
  });

  it('rejects bad input with a code and a location', async () => {
    const dupe = tmpFile('dupe.loc', '0 a SK0\n1 a SK0\n1 a SK1\n');
    expect((await cli(['groups', '--localities', dupe])).stderr).toMatch(/ETOPOLOGY: .*dupe\.loc:3: rank 1 appears twice \(first on line 2\)/);
    const missing = tmpFile('missing.loc', '0 a SK0\n2 a SK1\n');
    expect((await cli(['groups', '--localities', missing])).stderr).toMatch(/ETOPOLOGY: .*missing\.loc: rank\(s\) 1 missing/);
    const badLoc = tmpFile('bad.loc', '0 a SK0:XY3\n');
    expect((await cli(['groups', '--localities', badLoc])).stderr).toMatch(/ETOPOLOGY: .*bad\.loc:1: .*XY3/);
    const net = tmpFile('net.txt', 'node01 sw1\n');
    const r = await cli(['groups', '--hwloc-xml', exampleMachine, '--nodes', 'node[01-02]', '--ppn', '2', '--map-by', 'core', '--network', net]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ETOPOLOGY: .*node02/);
    expect((await cli(['groups', ...seedJob, '--disable', 'world'])).stderr).toMatch(/EINVAL: the level world cannot be disabled/);
    expect((await cli(['groups', ...seedJob, '--disable', 'switch3'])).stderr).toMatch(/EINVAL: unknown level "switch3".*switch1…switch2/);
    expect((await cli(['groups', ...seedJob, '--rank', '9999'])).stderr).toMatch(/EINVAL: .*--rank 9999 is outside 0…2303/);
    expect((await cli(['groups', '--localities', dupe, ...seedJob])).stderr).toMatch(/either --localities or the placement options/);
  });
});

describe('topocoll groups shows the configured algorithms', () => {
  it('per level, from --config', async () => {
    const config = tmpFile(
      'alg.yaml',
      'bcast:\n  levels: { switch1: knomial:4 }\nreduce:\n  levels: { socket: rabenseifner }\nallreduce: { algorithm: reduce-bcast }\n',
    );
    const r = await cli(['groups', ...seedJob, '--config', config]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^socket\s.*\s+shm\s+rabenseifner\s+\S/m);
    expect(r.stdout).toMatch(/^switch1\s.*\s+knomial:4\s+binomial \/ rabenseifner\s+\S/m);
    expect(r.stdout).toMatch(/^allreduce: reduce-bcast \(small\); large above 65536 bytes$/m);
  });
});
