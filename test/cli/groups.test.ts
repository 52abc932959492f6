import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { allgatherAlcd } from '../../src/algorithms/group-allgather.js';
import { exchangeLimits } from '../../src/runtime/job-planner.js';
import { MAX_SIZE_BUCKET, Selector, type Choice } from '../../src/algorithms/selection.js';
import { DEFAULT_CONFIG_PATH, loadConfigFile } from '../../src/config/load.js';
import type { GroupPlanJson } from '../../src/groups/plan-json.js';
import { s3Plan } from '../algorithms/plan-shapes.js';
import { tempDir } from '../helpers/temp.js';
import { cli, exampleMachine, exampleNetwork } from './helpers.js';

const range = (from: number, to: number, step = 1) => Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step);
const seedJob = ['--hwloc-xml', exampleMachine, '--nodes', 'node[01-64]', '--ppn', '36', '--map-by', 'core', '--network', exampleNetwork];

/** A table cell of size runs, "binomial ≤ 64 KiB, scatter-allgather", as [algorithm, largest size (null: no bound)]. */
function parseRuns(cell: string): [string, number | null][] {
  const UNIT: Record<string, number> = { B: 1, KiB: 1024, MiB: 1 << 20, GiB: 1 << 30 };
  return cell.split(', ').map((run) => {
    const m = /^(.+?)(?: ≤ (\d+) (B|KiB|MiB|GiB))?$/.exec(run)!;
    return [m[1]!, m[2] === undefined ? null : Number(m[2]) * UNIT[m[3]!]!];
  });
}

/** Problems of size runs against the choice of every size bucket: each bucket's algorithm is that of the first run holding it. */
function runProblems(what: string, runs: [string, number | null][], selector: Selector, pick: (c: Choice) => string): string[] {
  const problems: string[] = [];
  if (runs[runs.length - 1]![1] !== null) problems.push(`${what}: the last run has a bound`);
  for (let i = 1; i < runs.length; i++) if (runs[i]![0] === runs[i - 1]![0]) problems.push(`${what}: runs ${i - 1} and ${i} are both ${runs[i]![0]}`);
  for (let b = 0; b <= MAX_SIZE_BUCKET; b++) {
    const shown = runs.find(([, upTo]) => upTo === null || 2 ** b <= upTo)![0];
    const chosen = pick(selector.chooseBucket(b));
    if (shown !== chosen) problems.push(`${what}: ${2 ** b} B shows ${shown}, the choice is ${chosen}`);
  }
  return problems;
}

/** The rows of the level table, cells split at two or more spaces. */
const tableRows = (stdout: string) =>
  new Map(
    stdout
      .split('\n')
      .filter((l) => /^(socket|node|switch\d) /.test(l))
      .map((l) => [l.split(' ')[0]!, l.split(/\s{2,}/)]),
  );

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
    expect(r.stdout).toMatch(/^level\s+groups\s+size\s+leaders\s+bcast\s+reduce\s+allgather \(ALCD\)\s+gather\s+scatter\s+barrier$/m);
    // Per level the algorithms by runs of sizes: those of the cost model for the plan (the
    // default configuration, a core per rank, not oversubscribed, the job's eager limit).
    const plan = s3Plan(64, 36, 18, 16);
    const config = loadConfigFile(DEFAULT_CONFIG_PATH);
    const selector = new Selector(config, plan, exchangeLimits(config, plan, 'tcp'), { cores: 36, oversubscribed: false, mpi: false });
    const rows = tableRows(r.stdout);
    expect([...rows.keys()]).toEqual(['socket', 'node', 'switch1', 'switch2']);
    const problems: string[] = [];
    for (const [level, [, groups, size, leaders, bcast, reduce, allgather, gather, scatter, barrier]] of rows) {
      const all = plan.groups.get(level as never)!;
      const g = all[0]!;
      const n = g.members.length;
      expect([groups, size, leaders!.split(',')[0]]).toEqual([String(all.length), String(n), String(g.leader)]);
      problems.push(...runProblems(`${level} bcast`, parseRuns(bcast!), selector, (c) => formatAlgorithm(c.bcast(g))));
      problems.push(...runProblems(`${level} reduce`, parseRuns(reduce!), selector, (c) => formatAlgorithm(c.reduce(g))));
      // allgather: each run's algorithm with its ALCD (S2) in the level's largest group
      const withAlcd = parseRuns(allgather!).map(([text, upTo]): [string, number | null] => {
        const [algorithm, alcd] = text.split(' ');
        expect(alcd).toBe(allgatherAlcd(algorithm as never, n).toFixed(2));
        return [algorithm!, upTo];
      });
      problems.push(...runProblems(`${level} allgather`, withAlcd, selector, (c) => c.allgather(g)));
      problems.push(...runProblems(`${level} gather`, parseRuns(gather!), selector, (c) => c.gather(g)));
      problems.push(...runProblems(`${level} scatter`, parseRuns(scatter!), selector, (c) => c.scatter(g)));
      expect(barrier).toBe(formatAlgorithm(selector.chooseBucket(0).barrier(g)));
    }
    const allreduce = /^allreduce: (.*)$/m.exec(r.stdout)![1]!;
    problems.push(
      ...runProblems('allreduce', parseRuns(allreduce), selector, (c) =>
        c.allreduce.variant === 'reduce-bcast' ? 'reduce-bcast' : `reduce-allreduce-bcast (top ${c.allreduce.top})`,
      ),
    );
    expect(problems).toEqual([]);
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
  const configFile = () =>
    tmpFile('alg.yaml', 'bcast:\n  levels: { switch1: knomial:4 }\nreduce:\n  levels: { socket: rabenseifner }\nallreduce: { algorithm: reduce-bcast }\n');

  it('per level, from --config: one run of every size', async () => {
    const r = await cli(['groups', ...seedJob, '--config', configFile()]);
    expect(r.code).toBe(0);
    const rows = tableRows(r.stdout);
    expect(rows.get('socket')![5]).toBe('rabenseifner');
    expect(rows.get('switch1')![4]).toBe('knomial:4');
    expect(r.stdout).toMatch(/^allreduce: reduce-bcast$/m);
  });

  it("--explain: per size and collective every level's candidates, the least marked * and the configured =", async () => {
    const r = await cli(['groups', ...seedJob, '--config', configFile(), '--explain', '--bytes', '8,4MiB']);
    expect(r.code).toBe(0);
    const sections = r.stdout.split(/^# the cost model at /m).slice(1);
    expect(sections.map((t) => t.split(' (')[0])).toEqual(['8 B', '4 MiB']);
    const problems: string[] = [];
    for (const section of sections) {
      const headers = section
        .split('\n')
        .filter((l) =>
          /^[\w-]+: predicted \d+\.\d\d µs, (no segments|segments of \d+ (B|KiB|MiB))(, whole blocks|, block columns of \d+ (B|KiB|MiB))?$/.test(l),
        );
      expect(headers.map((h) => h.split(':')[0])).toEqual([
        'bcast',
        'reduce',
        'allreduce',
        'allgather',
        'gather',
        'scatter',
        'reduce-scatter',
        'scan',
        'alltoall',
        'barrier',
      ]);
      let collective = '';
      for (const line of section.split('\n')) {
        if (/^[\w-]+: predicted/.test(line)) collective = line.split(':')[0]!;
        const m = /^ {2}(\S+(?: \((?:reduce|bcast|reduce-scatter|scatter)\))?) \(group of (\d+), (.+?)\): (.*)$/.exec(line);
        if (m === null) continue;
        const cells = m[4]!.trim().split(/\s{2,}/);
        const marked = cells.filter((c) => c.startsWith('*') || c.startsWith('='));
        if (marked.length !== 1) {
          problems.push(`${collective} ${line}: ${marked.length} marked`);
          continue;
        }
        const us = (c: string) => Number(c.split(' ').pop());
        if (marked[0]!.startsWith('=')) {
          // configured: its own prediction alone
          if (cells.length !== 1) problems.push(`${collective} ${line}: configured with other candidates`);
        } else if (cells.some((c) => us(c) < us(marked[0]!))) problems.push(`${collective} ${line}: the marked one is not the least`);
      }
    }
    expect(problems).toEqual([]);
    expect(r.stdout).toMatch(/^ {2}switch1 \(group of 16, tcp\): =knomial:4 \d+\.\d\d$/m);
    expect(r.stdout).toMatch(/^ {2}socket \(reduce\) \(group of 18, shm\): =rabenseifner \d+\.\d\d$/m);
    expect(r.stdout).toMatch(/^ {2}whole call: \*reduce-bcast \d+\.\d\d$/m);
    expect((await cli(['groups', ...seedJob, '--explain', '--bytes', '8,lots'])).stderr).toMatch(
      /topocoll groups: EINVAL: --bytes takes sizes such as 65536, 64KiB or 1MiB, got "lots"/,
    );
  });
});

/**
 * Issue 18 §4: the S3 and S4 papers' clusters planned from parameters in YAML alone, no
 * processes (config/examples/model-*.yaml). The barrier rows compare the model with S4's report
 * (a combining tree below ~20 processes, dissemination above); barrier-model.test.ts pins the
 * formulas themselves.
 */
describe("topocoll groups --explain plans the papers' clusters from YAML parameters", () => {
  const examples = `${exampleMachine.replace(/machine-2s18c\.xml$/, '')}`;
  const s4Job = ['--hwloc-xml', `${examples}machine-2s12c.xml`, '--nodes', 'n[01-30]', '--ppn', '24', '--map-by', 'core'];
  /** The barrier's choice per level in an --explain output: level → [group size, chosen]. */
  const barrierChoices = (stdout: string): Map<string, [number, string]> => {
    const block = stdout.slice(stdout.indexOf('\nbarrier: predicted'));
    const out = new Map<string, [number, string]>();
    for (const m of block.matchAll(/^ {2}(\S+) \(group of (\d+), [^)]+\):.*\*(\S+)/gm)) out.set(m[1]!, [Number(m[2]), m[3]!]);
    return out;
  };

  it("S3's 64 × 2 × 18 cluster on the assumed InfiniBand model: every level of its fat tree has a choice at every size, the spine its own link", async () => {
    const r = await cli(['groups', ...seedJob, '--config', `${examples}model-infiniband.yaml`, '--explain', '--bytes', '8,64KiB,4MiB']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^2304 ranks on 64 node\(s\)/);
    const rows = tableRows(r.stdout);
    expect([...rows.keys()]).toEqual(['socket', 'node', 'switch1', 'switch2']);
    // The level table's bcast column: the S0 engine inside sockets for all but the smallest messages, trees between
    // nodes up to a MiB or so and scatter-allgather above (its exchanges between leaves, one rank per node, are not
    // bounded by an eager limit over TCP).
    expect(rows.get('socket')![4]).toMatch(/shm$/);
    expect(rows.get('switch1')![4]).toMatch(/binomial ≤ \d+ [KM]iB, scatter-allgather$/);
    // The spine's groups are priced on model.levels.switch2, the leaves' on the link between nodes.
    expect(r.stdout).toMatch(/^ {2}switch2 \(group of 4, model\.levels\.switch2\):/m);
    expect(r.stdout).toMatch(/^ {2}switch1 \(group of 16, tcp\):/m);
    for (const size of ['8 B', '64 KiB', '4 MiB']) expect(r.stdout).toContain(`# the cost model at ${size}`);
    // With o_s + L + o_r above the gap, dissemination at every level (S4: a combining tree below ~20 processes).
    expect([...barrierChoices(r.stdout).values()]).toEqual([
      [18, 'dissemination'],
      [2, 'dissemination'],
      [16, 'dissemination'],
      [4, 'dissemination'],
    ]);
  });

  it("S4's 30 × 2 × 12 cluster with S4's own LogP between nodes: dissemination for the 30 nodes, as S4 measured above ~20 processes", async () => {
    const r = await cli(['groups', ...s4Job, '--config', `${examples}model-s4-paper.yaml`, '--explain', '--bytes', '8']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^720 ranks on 30 node\(s\)/);
    expect(barrierChoices(r.stdout).get('world')).toEqual([30, 'dissemination']);
    expect(barrierChoices(r.stdout).get('socket')).toEqual([12, 'dissemination']);
  });

  it('links whose gap exceeds o_s + L + o_r give S4’s small-group combining tree: groups of 2…6, 9…11, 17…19 and 33 (a sawtooth at the powers of two)', async () => {
    const highGap = '{ L: 1, os: 0.3, or: 0.3, g: 5, G: 0.0001, Gx: 0.0002 }';
    const config = tmpFile('high-gap.yaml', `model:\n  links:\n    shm: ${highGap}\n    tcp: ${highGap}\n`);
    const s3 = barrierChoices((await cli(['groups', ...seedJob, '--config', config, '--explain', '--bytes', '8'])).stdout);
    expect(s3.get('socket')).toEqual([18, 'combining-tree:2']);
    expect(s3.get('node')).toEqual([2, 'central-counter']); // ties combining-tree:2, listed first
    expect(s3.get('switch1')).toEqual([16, 'dissemination']);
    expect(s3.get('switch2')).toEqual([4, 'combining-tree:2']);
    const s4 = barrierChoices((await cli(['groups', ...s4Job, '--config', config, '--explain', '--bytes', '8'])).stdout);
    expect(s4.get('socket')).toEqual([12, 'dissemination']);
    expect(s4.get('world')).toEqual([30, 'dissemination']);
  });
});
