import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { declaredOptions, nearestOption, optionSpellings, parseCommandArgs } from '../../src/cli/args.js';
import { commands } from '../../src/cli/run-cli.js';
import { cli, repoRoot } from './helpers.js';

/**
 * The command line's shared behaviour (src/cli/args.ts, src/cli/run-cli.ts), in-process: the
 * version, usage errors (status 2, one line pointing at --help, the nearest option suggested),
 * and every command's --help against the options it declares. Commands are taken from run-cli's
 * table, so a command added there is checked without a line here.
 */
const version = (JSON.parse(readFileSync(`${repoRoot}package.json`, 'utf8')) as { version: string }).version;

/** A usage error: status 2, nothing on stdout, one line on stderr that ends pointing at --help. */
function expectUsageError(r: { code: number; stdout: string; stderr: string }, command: string): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr.split('\n')).toHaveLength(2);
  expect(r.stderr).toMatch(
    new RegExp(
      `^topocoll${command ? ` ${command}` : ''}: EINVAL: .*[.?] Run "topocoll${command ? ` ${command}` : ''} --help" for the (options|commands)\\.\\n$`,
    ),
  );
}

describe('topocoll --version, --help and usage errors', () => {
  it('--version and -v print the package version', async () => {
    for (const flag of ['--version', '-v']) {
      const r = await cli([flag]);
      expect(r).toEqual({ code: 0, stdout: `topocoll ${version}\n`, stderr: '' });
    }
  });

  it('--help lists the commands and exits 0; no command at all is a usage error with the same text', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    for (const name of Object.keys(commands)) expect(help.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    expect(help.stdout).toMatch(/topocoll --version/);
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(help.stdout);
  });

  it('an unknown command or top-level option: one line, the nearest suggested', async () => {
    const typo = await cli(['rnu', '-n', '2']);
    expectUsageError(typo, '');
    expect(typo.stderr).toMatch(/unknown command "rnu"; did you mean "run"\?/);
    const far = await cli(['frobnicate']);
    expectUsageError(far, '');
    expect(far.stderr).not.toMatch(/did you mean/);
    const option = await cli(['--verison']);
    expectUsageError(option, '');
    expect(option.stderr).toMatch(/unknown option --verison; did you mean --version\?/);
  });

  it("a command's unknown option: one line, the nearest valid one suggested", async () => {
    const r = await cli(['run', '-n', '2', '--tagoutput', 'app.mjs']);
    expectUsageError(r, 'run');
    expect(r.stderr).toBe('topocoll run: EINVAL: unknown option --tagoutput; did you mean --tag-output? Run "topocoll run --help" for the options.\n');
    const value = await cli(['topo', '--hwlocxml=x.xml']);
    expectUsageError(value, 'topo');
    expect(value.stderr).toMatch(/unknown option --hwlocxml; did you mean --hwloc-xml\?/);
    const nothingNear = await cli(['groups', '--zzzzzzzz']);
    expectUsageError(nothingNear, 'groups');
    expect(nothingNear.stderr).not.toMatch(/did you mean/);
  });

  it('missing values, bad values, missing operands and stray arguments are usage errors too', async () => {
    expectUsageError(await cli(['run', '-n']), 'run');
    expectUsageError(await cli(['run', 'app.mjs']), 'run');
    expectUsageError(await cli(['run', '-n', '2']), 'run');
    expectUsageError(await cli(['run', '-n', 'two', 'app.mjs']), 'run');
    expectUsageError(await cli(['run', '-n', '2', '--bind', 'l3', 'app.mjs']), 'run');
    expectUsageError(await cli(['topo', 'extra']), 'topo');
    expectUsageError(await cli(['tune', 'tcp']), 'tune');
    expectUsageError(await cli(['bench', 'allsum']), 'bench');
    expectUsageError(await cli(['localities', '--nodes', 'a']), 'localities');
  });

  it('options that do not go together, or a value out of range, are usage errors before anything runs', async () => {
    expectUsageError(await cli(['bench', 'barrier', '--strategies']), 'bench');
    expectUsageError(await cli(['bench', '--model', '--sweep']), 'bench');
    expectUsageError(await cli(['bench', '--repeat', '0']), 'bench');
    expectUsageError(await cli(['bench', '--min', '64', '--max', '8']), 'bench');
    expectUsageError(await cli(['bench', '--hosts', '1x1x1']), 'bench');
    expectUsageError(await cli(['bench', '--hosts', '2x1x1', '-n', '4']), 'bench');
    expectUsageError(await cli(['bench', 'allreduce', '--peers', 'ompi,lam']), 'bench');
    expectUsageError(await cli(['bench', '--from-json', 'rows.jsonl']), 'bench');
    expectUsageError(await cli(['tune', 'shm', '-n', '1']), 'tune');
    expectUsageError(await cli(['cluster', 'exec']), 'cluster');
    expectUsageError(await cli(['cluster', 'up', '--network', 'net.txt', '--leaves', '2']), 'cluster');
  });

  it('a failure of what the command ran is not a usage error: status 1', async () => {
    const r = await cli(['run', '-n', '2', 'no-such-script.mjs']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the script no-such-script\.mjs does not exist/);
  });
});

describe("every command's --help", () => {
  for (const name of Object.keys(commands)) {
    it(`topocoll ${name} --help lists each of its options`, async () => {
      const r = await cli([name, '--help']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: topocoll ${name}`, 'm'));
      // A command with subcommands (`tune shm`) may parse their options under their own names
      // (parseCommandArgs('tune shm', …)): the help of each subcommand the help names is asked
      // too, and every option any of them declares must be in the command's help.
      const subcommands = new Set([...r.stdout.matchAll(new RegExp(`topocoll ${name} ([a-z][a-z-]*)`, 'g'))].map((m) => m[1]!));
      for (const sub of subcommands) await cli([name, sub, '--help']);
      const declared = [...declaredOptions].filter(([command]) => command === name || command.startsWith(`${name} `));
      expect(declared.length, `${name} parses its arguments with parseCommandArgs`).toBeGreaterThan(0);
      // Listed under its long name, or its short one (`-n N`).
      const unlisted = declared
        .flatMap(([, options]) => Object.entries(options))
        .filter(([o]) => o !== 'help')
        .filter(([o, spec]) => !new RegExp(`(--${o}|-${spec.short ?? '--'})(?![\\w-])`).test(r.stdout))
        .map(([o]) => o);
      expect(unlisted).toEqual([]);
    });
  }
});

describe('nearestOption', () => {
  const spellings = optionSpellings({ np: { type: 'string', short: 'n' }, nodes: { type: 'string' }, 'tag-output': { type: 'boolean' } });
  it('suggests within a small edit distance, scaled to the name', () => {
    expect(spellings).toEqual(['--np', '-n', '--nodes', '--tag-output']);
    expect(nearestOption('--tag-ouput', spellings)).toBe('--tag-output');
    expect(nearestOption('--node', spellings)).toBe('--nodes');
    expect(nearestOption('--nodes=3', spellings.slice(0, 2))).toBeUndefined();
    expect(nearestOption('--xyz', spellings)).toBeUndefined();
    expect(nearestOption('--x', [])).toBeUndefined();
  });
});

describe('internal options', () => {
  it('are parsed, but neither declared for --help nor suggested', () => {
    const options = { np: { type: 'string', short: 'n' }, keeper: { type: 'boolean' } } as const;
    expect(parseCommandArgs('internal-probe', ['--keeper', '-n', '2'], options, false, ['keeper']).values).toEqual({ keeper: true, np: '2' });
    expect(Object.keys(declaredOptions.get('internal-probe')!)).toEqual(['np']);
    expect(() => parseCommandArgs('internal-probe', ['--keepr'], options, false, ['keeper'])).toThrow(/^EINVAL: unknown option --keepr\.$/);
  });
});
