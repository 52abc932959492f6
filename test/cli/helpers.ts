import { fileURLToPath } from 'node:url';
import { runCli } from '../../src/cli/run-cli.js';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const exampleMachine = `${repoRoot}config/examples/machine-2s18c.xml`;
export const exampleNetwork = `${repoRoot}config/examples/network-simple.txt`;
export const fixture = (name: string) => `${repoRoot}test/fixtures/hwloc/${name}`;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `topocoll <argv>` in this process with captured output. */
export async function cli(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    env: { ...process.env, ...env },
    cwd: repoRoot,
  });
  return { code, stdout, stderr };
}
