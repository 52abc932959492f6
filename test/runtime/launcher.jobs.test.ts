import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { describe, expect, it } from 'vitest';
import { discoverMachine } from '../../src/topology/discover.js';
import type { MachineTopology } from '../../src/topology/types.js';
import { formatIndexList } from '../../src/topology/index-list.js';
import { jobScript, repoRoot, runJob } from '../helpers/jobs.js';

/** `topocoll run` itself: binding, environment, exit codes, stopping the job, signals. */
const probe = jobScript('launcher-probe.mjs');

function reports(stdout: string) {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map(
      (l) =>
        JSON.parse(l) as {
          rank: number;
          size: string;
          local: string;
          localSize: string;
          node: string | null;
          cpus: string;
          args: string[];
          machine: string | null;
        },
    )
    .sort((a, b) => a.rank - b.rank);
}

describe('topocoll run', () => {
  it('binds local rank j to core j mod cores, hands down the environment and the script arguments', () => {
    const r = runJob(['-n', '3', '--nodes', '2', probe, 'affinity', '--flag', 'x']);
    expect(r.status).toBe(0);
    // Independent reference: the cores as lstopo lists them, in logical order.
    const cores = discoverMachine({ source: 'lstopo' }).objects.core!;
    const core = (j: number) => formatIndexList(cores[j % cores.length]!.pus);
    const got = reports(r.stdout);
    expect(got.map(({ machine: _, ...rest }) => rest)).toEqual([
      { rank: 0, size: '3', local: '0', localSize: '2', node: 'node0', cpus: core(0), args: ['--flag', 'x'] },
      { rank: 1, size: '3', local: '1', localSize: '2', node: 'node0', cpus: core(1), args: ['--flag', 'x'] },
      // Emulated nodes share this machine's cores: rank r on core r mod cores.
      { rank: 2, size: '3', local: '0', localSize: '1', node: 'node1', cpus: core(2), args: ['--flag', 'x'] },
    ]);
    // The machine the launcher got from lstopo, handed to every rank (so none runs lstopo or
    // parses its XML again): the same machine lstopo describes.
    for (const { machine } of got) expect((JSON.parse(machine!) as MachineTopology).objects.core).toEqual(cores);
  });

  it('leaves processes unbound with --bind none and says when ranks outnumber cores', () => {
    const all = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1];
    const none = runJob(['-n', '2', '--bind', 'none', probe, 'affinity']);
    expect(reports(none.stdout).map((x) => x.cpus)).toEqual([all, all]);
    // Without binding the launcher does not look at the machine, and hands nothing down.
    expect(reports(none.stdout).map((x) => x.machine)).toEqual([null, null]);
    const many = runJob(['-n', String(cpus().length + 1), probe, 'affinity']);
    expect(many.stderr).toMatch(/ranks on \d+ cores: binding wraps around/);
  });

  it('exits with the first non-zero exit code and stops the ranks that keep running', () => {
    // The other ranks would run forever: the job ends only because the launcher stops them.
    const r = runJob(['--timeout', '1', '-n', '3', probe, 'fail'], 60_000);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(5);
    expect(r.stderr).toMatch(/rank 0 exited with code 5; stopping the job/);
  });

  it('forwards SIGTERM to every rank', async () => {
    const child = spawn(process.execPath, [`${repoRoot}dist/cli/main.js`, 'run', '-n', '2', probe, 'sleep'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let sent = false;
    child.stdout.on('data', (d) => {
      out += d;
      // Once: every later chunk still contains both "ready" lines, and a second SIGTERM that
      // lands after the launcher has removed its handlers kills it (exit code null, not 143).
      if (!sent && (out.match(/ready/g) ?? []).length === 2) {
        sent = true;
        child.kill('SIGTERM');
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(out).toMatch(/rank 0 got SIGTERM/);
    expect(out).toMatch(/rank 1 got SIGTERM/);
    expect(code).toBe(143);
  });

  it('rejects bad options before starting anything', () => {
    expect(runJob(['-n', '0', probe]).stderr).toMatch(/EINVAL: -n must be a positive integer/);
    expect(runJob(['-n', '2', '--nodes', '3', probe]).stderr).toMatch(/EINVAL: --nodes must be between 1 and the number of ranks \(2\)/);
    expect(runJob(['-n', '2', '--bind', 'l3', probe]).stderr).toMatch(/--bind must be one of core, numa, socket, none/);
    expect(runJob(['-n', '2', 'missing.mjs']).stderr).toMatch(/EINVAL: .*the script missing\.mjs does not exist/);
  });
});
