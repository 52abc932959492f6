import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { describe, expect, it } from 'vitest';
import { parseBenchJson } from '../../src/cli/bench-report.js';
import { tempDir } from '../helpers/temp.js';
import { cli, repoRoot } from './helpers.js';

const saved = `${repoRoot}test/fixtures/bench/p4.jsonl`;
const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '@_', isArray: (name) => name === 'g' || name === 'text' });

/** The chart's title and its series' labels, read back from the SVG. */
function read(file: string): { svg: string; title: string; series: string[] } {
  const svg = readFileSync(file, 'utf8');
  expect(XMLValidator.validate(svg)).toBe(true);
  const root = (parser.parse(svg) as { svg: { title: string; g: Record<string, string>[] } }).svg;
  return { svg, title: root.title, series: root.g.filter((g) => g['@_class'] === 'series').map((g) => g['@_data-series']!) };
}

describe('topocoll bench --report', () => {
  it('--from-json draws one chart per collective and job from saved rows, byte for byte the same every time', async () => {
    const dir = tempDir('topocoll-report-');
    const r = await cli(['bench', '--from-json', saved, '--report', join(dir, 'a')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/4 charts in .*a: bcast-p4\.svg, allreduce-p4\.svg, allgather-p4\.svg, allreduce-p4-nodes2\.svg/);
    // barrier has one size: no chart.
    expect(readdirSync(join(dir, 'a')).sort()).toEqual(['allgather-p4.svg', 'allreduce-p4-nodes2.svg', 'allreduce-p4.svg', 'bcast-p4.svg']);

    const bcast = read(join(dir, 'a', 'bcast-p4.svg'));
    expect(bcast.title).toBe('bcast, 4 ranks, one node');
    expect(bcast.series).toEqual(['topocoll sync', 'topocoll async', 'Open MPI', 'memcpy']);
    expect(bcast.svg).toContain('topocoll abc1234 · 2025-01-31');
    // Two runs of bcast sync at 4 B in the file: the faster is drawn.
    expect(bcast.svg).toContain('<title>topocoll sync, 4 B: 0.25</title>');
    expect(bcast.svg).not.toContain('<title>topocoll sync, 4 B: 0.5</title>');

    // allreduce has no memcpy column; allgather's is one copy of the whole result (4 × bytes).
    expect(read(join(dir, 'a', 'allreduce-p4.svg')).series).toEqual(['topocoll sync', 'topocoll async', 'Open MPI']);
    const gather = read(join(dir, 'a', 'allgather-p4.svg'));
    expect(gather.series).toEqual(['topocoll sync', 'topocoll async', 'Open MPI', 'memcpy of result']);
    expect(gather.svg).toContain('<title>memcpy of result, 8 B: 0.0232</title>');
    expect(gather.svg).toContain('bytes per rank');

    // Emulated nodes: their own chart, named and titled by them; rows without commit or date.
    const nodes = read(join(dir, 'a', 'allreduce-p4-nodes2.svg'));
    expect(nodes.title).toBe('allreduce, 4 ranks, on 2 emulated nodes');
    expect(nodes.series).toEqual(['topocoll sync']);
    expect(nodes.svg).not.toContain('topocoll abc1234');

    await cli(['bench', '--from-json', saved, '--report', join(dir, 'b')]);
    for (const f of readdirSync(join(dir, 'a'))) expect(readFileSync(join(dir, 'b', f), 'utf8')).toBe(readFileSync(join(dir, 'a', f), 'utf8'));
  });

  it('--from-json picks collectives, needs --report, and refuses options that would measure', async () => {
    const dir = tempDir('topocoll-report-');
    expect((await cli(['bench', 'allgather', '--from-json', saved, '--report', dir])).code).toBe(0);
    expect(readdirSync(dir)).toEqual(['allgather-p4.svg']);
    const noReport = await cli(['bench', '--from-json', saved]);
    expect(noReport.code).toBe(2);
    expect(noReport.stderr).toMatch(/--from-json goes with --report DIR/);
    const measuring = await cli(['bench', '--from-json', saved, '--report', dir, '-n', '4', '--no-mpi']);
    expect(measuring.code).toBe(2);
    expect(measuring.stderr).toMatch(/--from-json draws saved rows; -n, --no-mpi would measure/);
    const bad = join(tempDir('topocoll-report-'), 'bad.jsonl');
    writeFileSync(bad, '{"collective":"bcast"}\n');
    expect((await cli(['bench', '--from-json', bad, '--report', dir])).stderr).toMatch(/bad\.jsonl:1 is not a row of "topocoll bench --json"/);
  });

  it('reads --json output: rows kept, the probe and notes skipped', () => {
    const rows = parseBenchJson(readFileSync(saved, 'utf8') + 'a note a worker printed\n', 'p4.jsonl');
    expect(rows.length).toBe(readFileSync(saved, 'utf8').trim().split('\n').length - 1);
    expect(rows.every((r) => typeof r.ranks === 'number' && !('probe' in r))).toBe(true);
  });

  it('the help names --report and --from-json', async () => {
    const help = (await cli(['bench', '--help'])).stdout;
    expect(help).toMatch(/--report DIR/);
    expect(help).toMatch(/--from-json FILE --report DIR/);
  });

  it('a real short run writes the charts from the rows its --json prints, and no progress line off a terminal', async () => {
    const dir = tempDir('topocoll-report-');
    const args = ['bench', 'allgather', '-n', '2', '--min', '8', '--max', '32', '--modes', 'sync', '--iterations', '50', '--no-mpi'];
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, ...args, '--json', '--report', join(dir, 'live')], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('\r');
    expect(readdirSync(join(dir, 'live'))).toEqual(['allgather-p2.svg']);
    const chart = read(join(dir, 'live', 'allgather-p2.svg'));
    expect(chart.title).toBe('allgather, 2 ranks, one node');
    expect(chart.series).toEqual(['topocoll sync', 'memcpy of result']);
    // Every row says its job, and the day it ran.
    const rows = parseBenchJson(r.stdout, 'stdout');
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.ranks).toBe(2);
      expect(row.date).toMatch(/^\d{4}-\d\d-\d\d$/);
    }
    // The saved rows redraw the same chart.
    const json = join(dir, 'run.jsonl');
    writeFileSync(json, r.stdout);
    expect((await cli(['bench', '--from-json', json, '--report', join(dir, 'again')])).code).toBe(0);
    expect(readFileSync(join(dir, 'again', 'allgather-p2.svg'), 'utf8')).toBe(chart.svg);
  });
});
