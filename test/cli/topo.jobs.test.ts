import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TopoReport } from '../../src/cli/commands/topo.js';
import { tempDir } from '../helpers/temp.js';
import { cli, exampleMachine, repoRoot } from './helpers.js';

describe('topocoll topo', () => {
  it('describes a given machine: unit counts and which levels carry groups', async () => {
    const r = await cli(['topo', '--hwloc-xml', exampleMachine, '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as TopoReport;
    expect(report.source).toBe(`hwloc-xml:${exampleMachine}`);
    expect(report.pus).toBe(36);
    expect(report.levels).toEqual([
      { level: 'core', units: 36, active: false, reason: 'every core unit holds one rank' },
      { level: 'l1', units: 36, active: false, reason: 'every l1 unit holds one rank' },
      { level: 'l2', units: 36, active: false, reason: 'every l2 unit holds one rank' },
      { level: 'l3', units: 2, active: false, reason: 'same groups as socket' },
      { level: 'numa', units: 2, active: false, reason: 'same groups as socket' },
      { level: 'socket', units: 2, active: true },
    ]);
    // 36 ranks: per rank a 1 MiB bcast queue and an outbox for channels of 64 KiB (the largest
    // `auto` takes at 21 ranks and more), made only to the ranks it sends to; nothing per pair.
    expect(report.sharedMemory).toMatchObject({ localRanks: 36, channelBytes: 64 << 10, channelMinBytes: 64 << 10, bcastQueueBytes: 1 << 20 });
    const { segmentBytes, channelPoolBytes, budgetBytes } = report.sharedMemory;
    expect(segmentBytes).toBeGreaterThan(36 * (channelPoolBytes + (1 << 20)));
    expect(segmentBytes).toBeLessThan(36 * (channelPoolBytes + (2 << 20)));
    expect(segmentBytes).toBeLessThanOrEqual(budgetBytes);
  });

  it('reports this process: its cpus, whether it is bound, its locality string', async () => {
    const r = await cli(['topo', '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as TopoReport;
    // Independent reference for the affinity: the kernel's own view through taskset-free /proc.
    const allowed = /Cpus_allowed_list:\s*(\S+)/.exec(execFileSync('cat', ['/proc/self/status'], { encoding: 'utf8' }))![1];
    expect(report.process.cpus).toBe(allowed);
    expect(report.process.locality).toMatch(/^(SK|L3|L2|L1|CR|HT|NM)/);
    expect(report.process.localitySource).toBe('computed');
  });

  it('reports the locality override and honours a config that disables a level', async () => {
    const r = await cli(['topo', '--hwloc-xml', exampleMachine, '--json'], { TOPOCOLL_LOCALITY: 'SK0:CR3' });
    const report = JSON.parse(r.stdout) as TopoReport;
    expect(report.process).toMatchObject({ locality: 'SK0:CR3', localitySource: 'override' });
    const dir = tempDir('topocoll-topo-');
    writeFileSync(join(dir, 'c.yaml'), 'levels:\n  socket: { enabled: false }\n');
    const off = JSON.parse((await cli(['topo', '--hwloc-xml', exampleMachine, '--config', join(dir, 'c.yaml'), '--json'])).stdout) as TopoReport;
    expect(off.levels.find((l) => l.level === 'socket')).toEqual({ level: 'socket', units: 2, active: false, reason: 'disabled by configuration' });
    // numa has the same groups socket had; it is next in the fixed order, so it takes over.
    expect(off.levels.find((l) => l.level === 'numa')).toEqual({ level: 'numa', units: 2, active: true });
  });

  it('runs as the installed bin with a human summary', () => {
    const out = execFileSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'topo', '--hwloc-xml', exampleMachine], { encoding: 'utf8' });
    expect(out).toMatch(/^topology source: hwloc-xml:/);
    expect(out).toMatch(/^socket\s+2\s+active$/m);
    expect(out).toMatch(/^numa\s+2\s+dropped: same groups as socket$/m);
  });
});
