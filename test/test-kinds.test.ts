import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers/jobs.js';

/**
 * vitest.config.ts tells the two kinds of test file apart by name: a file that starts processes
 * is a `*.jobs.test.ts` (built first, run beside other job files); any other runs in the vitest
 * worker in seconds (it may run a short reference tool such as lstopo, not a node process). A file that starts processes under another name would run in the unit
 * project, against an unbuilt dist/, and stretch `npm run test:unit`: this finds one.
 */
const STARTS_PROCESSES = [
  // the helpers that start jobs (repoRoot alone comes from jobs.ts too: the import names it)
  /import \{[^}]*\b(?:runJob|runJobOverSocketLayer|runAcrossHosts|startSlurmCluster|runTorchrunJob)\b[^}]*\} from/,
  /from '[./]*helpers\/(?:host-jobs|hosts|slurm|torchrun)\.js'/,
  // node processes and launchers (a unit file may run a reference tool such as lstopo)
  /process\.execPath/,
  /['"](?:mpirun|mpiexec|srun)['"]/,
  /dist\/(?:cli|bundle)\//,
];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

describe('test file kinds', () => {
  const files = testFiles(join(repoRoot, 'test')).map((f) => relative(repoRoot, f));

  it('a file that starts processes is named *.jobs.test.ts', () => {
    const misnamed = files
      .filter((f) => !f.endsWith('.jobs.test.ts') && f !== 'test/test-kinds.test.ts')
      .filter((f) => STARTS_PROCESSES.some((re) => re.test(readFileSync(join(repoRoot, f), 'utf8'))));
    expect(misnamed).toEqual([]);
  });

  it('both kinds exist (the patterns still match files)', () => {
    expect(files.filter((f) => f.endsWith('.jobs.test.ts')).length).toBeGreaterThan(20);
    expect(files.filter((f) => !f.endsWith('.jobs.test.ts')).length).toBeGreaterThan(20);
  });
});
