import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/temp.js';
import { repoRoot } from './helpers.js';

/**
 * The package as npm users get it (issue 43): `npm pack` of a copy of this checkout (so that its
 * prepack and prepare scripts neither rebuild this checkout's dist/, which job files beside this
 * one run, nor leave prebuilds/ in it), installed into an empty project by a node and npm that
 * see no cmake, make or C/C++ compiler on PATH; then a job of the demo, the --version, a
 * TypeScript consumer type-checked with tsc --strict against the installed types and run, a
 * CommonJS consumer run, and last the build-from-source fallback with the tools back on PATH.
 * One pack and one install serve every check. The pack takes the checkout's own build/ addon as
 * its prebuilt one when build/ is up to date with these sources and configured with the defaults
 * (TOPOCOLL_PREBUILD_FROM, scripts/prebuild.mjs; else it compiles, 30–60 s of one core), so that
 * the fallback's compile from the tarball's sources (the same cmake-js build) is the one compile
 * of this file.
 */
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
/** What a machine with Node.js alone has: node, npm, npx and a shell (npm runs scripts with sh). */
const NODE_ALONE = ['node', 'npm', 'npx', 'sh'];
/** The tools a compile needs, none of which the install may reach. */
const BUILD_TOOLS = ['cmake', 'make', 'ninja', 'cc', 'c++', 'gcc', 'g++', 'clang', 'clang++', 'mpicc'];
/** Upper bound of the tarball (the README states its size; the addon is about half of it). */
const MAX_TARBALL_BYTES = 1.5 * 1024 * 1024;

/**
 * The environment of a command here: none of the npm_* variables of an `npm test` around this
 * run (npm_config_build_from_source among them), nothing else that steers a compiler; the same
 * npm cache as this checkout's install, so packages come from it (--prefer-offline).
 */
function env(path: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  // Compiles on one core: the other stays with the job file that runs beside this one.
  const kept: NodeJS.ProcessEnv = { HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, LANG: 'C.UTF-8', PATH: path, CMAKE_BUILD_PARALLEL_LEVEL: '1' };
  return { ...kept, ...extra };
}

function run(command: string, args: string[], cwd: string, environment: NodeJS.ProcessEnv, timeoutMs = 240_000): SpawnSyncReturns<string> {
  const r = spawnSync(command, args, { cwd, env: environment, encoding: 'utf8', timeout: timeoutMs });
  if (r.error) throw r.error;
  return r;
}

/** `r`'s output, for an assertion's message. */
const out = (r: SpawnSyncReturns<string>) => `exit ${r.status}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

/** The path of an executable `name` in `/usr/local/bin`, `/usr/bin` or `/bin`, resolved. */
function systemTool(name: string): string {
  for (const dir of ['/usr/local/bin', '/usr/bin', '/bin']) if (existsSync(join(dir, name))) return join(dir, name);
  throw new Error(`${name} is not installed`);
}

let app: string;
let tarball: string;
let nodeAlonePath: string;
let install: SpawnSyncReturns<string>;

beforeAll(() => {
  // A copy of the checkout's files (tracked, and new ones not ignored), with its node_modules.
  const source = tempDir('topocoll-pack-src-');
  const listed = run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], repoRoot, process.env);
  expect(listed.status, out(listed)).toBe(0);
  for (const file of listed.stdout.split('\0').filter((f) => f !== '' && existsSync(join(repoRoot, f)))) {
    mkdirSync(dirname(join(source, file)), { recursive: true });
    cpSync(join(repoRoot, file), join(source, file));
  }
  symlinkSync(join(repoRoot, 'node_modules'), join(source, 'node_modules'));
  const packs = tempDir('topocoll-packs-');
  const pack = run(
    'npm',
    ['pack', '--pack-destination', packs],
    source,
    env(process.env.PATH ?? '', { TOPOCOLL_PREBUILD_FROM: join(repoRoot, 'build') }),
    480_000,
  );
  expect(pack.status, out(pack)).toBe(0);
  tarball = join(packs, `topocoll-${version}.tgz`);
  expect(existsSync(join(source, 'prebuilds')), 'postpack removes prebuilds/').toBe(false);

  // node, npm, npx and sh alone on PATH: symlinks to the real files (npm's are scripts that
  // find node through /usr/bin/env, i.e. on this PATH).
  const bin = tempDir('topocoll-node-alone-');
  for (const name of NODE_ALONE) symlinkSync(name === 'node' ? process.execPath : systemTool(name), join(bin, name));
  nodeAlonePath = bin;
  app = tempDir('topocoll-app-');
  // allowScripts: recent npm (11.19) runs a dependency's install script only when the project allows it;
  // allowed here, so that the install script's own choice (the prebuilt binary) is checked too.
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module', allowScripts: { [`file:${tarball}`]: true } }),
  );
  install = run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund', '--foreground-scripts'], app, env(bin), 480_000);
}, 900_000);

describe('the packed tarball', () => {
  it('holds what runs: the prebuilt addon, dist, the examples and what a compile needs; no tests, bench data or source maps', () => {
    expect(statSync(tarball).size).toBeLessThan(MAX_TARBALL_BYTES);
    const list = run('tar', ['tzf', tarball], app, process.env);
    const files = list.stdout.split('\n').filter((f) => f !== '');
    for (const f of [
      'package/prebuilds/linux-x64/node.napi.glibc.node',
      'package/dist/bundle/index.js',
      'package/dist/index.d.ts',
      'package/dist/cli/main.js',
      'package/examples/demo.mjs',
      'package/native/CMakeLists.txt',
      'package/scripts/install.mjs',
      'package/scripts/build-mpi.mjs',
      'package/README.md',
      'package/LICENSE',
    ]) {
      expect(files).toContain(f);
    }
    expect(files.filter((f) => /^package\/(test|bench|build|src|abi|docs)\/|\.map$|\.tgz$/.test(f))).toEqual([]);
  });

  it('installs with node and npm alone on PATH: the prebuilt addon, no compile, topocoll/mpi skipped with one line', () => {
    for (const tool of BUILD_TOOLS) expect(existsSync(join(nodeAlonePath, tool))).toBe(false);
    expect(install.status, out(install)).toBe(0);
    expect(install.stdout).toMatch(/topocoll: using the prebuilt addon prebuilds\/linux-x64\/node\.napi\.glibc\.node/);
    expect(install.stdout).toMatch(/topocoll: no MPI library found \(mpicc\), so topocoll\/mpi is not built/);
    expect(install.stdout).not.toMatch(/compiling the addon/);
    expect(existsSync(join(app, 'node_modules/topocoll/build'))).toBe(false);
  });

  it('runs the demo with npx topocoll run -n 2, and tells its version', () => {
    const demo = run('npx', ['topocoll', 'run', '-n', '2', 'node_modules/topocoll/examples/demo.mjs'], app, env(nodeAlonePath));
    expect(demo.status, out(demo)).toBe(0);
    const lines = demo.stdout.split('\n').filter((l) => l.startsWith('rank '));
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toMatch(/^rank [01]\/2 on \S+: sum 1, bcast "hello from rank 1", levels .*; allreduce\(8 B\) [\d.]+ µs/);
    const v = run('npx', ['topocoll', '--version'], app, env(nodeAlonePath));
    expect(v.stdout).toBe(`topocoll ${version}\n`);
    const usage = run('npx', ['topocoll', 'run', '-n', '2', '--tagoutput', 'x.mjs'], app, env(nodeAlonePath));
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/did you mean --tag-output\? Run "topocoll run --help" for the options\.\n$/);
  });

  it('serves a TypeScript consumer (tsc --strict against the installed types), an ES module and a CommonJS one', () => {
    // The first program of a TypeScript user: the README's, typed. This checkout's tsc and
    // @types/node (the versions of its lockfile) stand in for the user's own.
    writeFileSync(
      join(app, 'consumer.ts'),
      `import { init, IN_PLACE, isTopocollError, type Communicator } from 'topocoll';
import { mpiAvailable } from 'topocoll/mpi';

const comm: Communicator = await init();
const grad = new Float32Array(1024).fill(comm.rank);
comm.allreduceSync(IN_PLACE, grad, 'sum');
await comm.bcast(grad, 0);
try {
  comm.bcastSync(grad, comm.size);
} catch (e) {
  if (!isTopocollError(e, 'EINVAL')) throw e;
}
const mpi: boolean = mpiAvailable();
console.log(\`ts rank \${comm.rank}/\${comm.size}: \${grad[0]} mpi \${mpi}\`);
comm.close();
`,
    );
    const tsc = run(
      process.execPath,
      [
        join(repoRoot, 'node_modules/typescript/bin/tsc'),
        '--strict',
        '--module',
        'nodenext',
        '--target',
        'es2022',
        '--typeRoots',
        join(repoRoot, 'node_modules/@types'),
        '--types',
        'node',
        'consumer.ts',
      ],
      app,
      env(nodeAlonePath),
    );
    expect(tsc.status, out(tsc)).toBe(0);
    const ts = run('npx', ['topocoll', 'run', '-n', '2', 'consumer.js'], app, env(nodeAlonePath));
    expect(ts.status, out(ts)).toBe(0);
    expect(
      ts.stdout
        .split('\n')
        .filter((l) => l.startsWith('ts rank'))
        .sort(),
    ).toEqual(['ts rank 0/2: 1 mpi false', 'ts rank 1/2: 1 mpi false']);

    // CommonJS: require() of the ES module package (Node.js ≥ 20.19, the package's engines);
    // topocoll/mpi loads without its addon, and using it is ENOTSUP.
    writeFileSync(
      join(app, 'consumer.cjs'),
      `const { init } = require('topocoll');
const { initMpi, mpiAvailable } = require('topocoll/mpi');
init().then((comm) => {
  const sum = new Float64Array(1);
  comm.allreduceSync(Float64Array.of(comm.rank + 1), sum, 'sum');
  let mpi = 'available';
  try {
    initMpi();
  } catch (e) {
    mpi = e.code;
  }
  console.log(\`cjs rank \${comm.rank}/\${comm.size}: sum \${sum[0]} mpi \${mpiAvailable()} \${mpi}\`);
  comm.close();
});
`,
    );
    const cjs = run('npx', ['topocoll', 'run', '-n', '2', 'consumer.cjs'], app, env(nodeAlonePath));
    expect(cjs.status, out(cjs)).toBe(0);
    expect(
      cjs.stdout
        .split('\n')
        .filter((l) => l.startsWith('cjs rank'))
        .sort(),
    ).toEqual(['cjs rank 0/2: sum 3 mpi false ENOTSUP', 'cjs rank 1/2: sum 3 mpi false ENOTSUP']);
    expect(cjs.stderr).not.toMatch(/ExperimentalWarning/);
  });

  it('where no prebuilt binary fits (LIBC=musl, as node-gyp-build reads it): the install script goes to compile, and a job says how', () => {
    const musl = env(nodeAlonePath, { LIBC: 'musl' });
    const rebuild = run('npm', ['rebuild', 'topocoll', '--foreground-scripts'], app, musl);
    // No cmake on this PATH: the compile it chose fails, and so does the install, saying why.
    expect(rebuild.status, out(rebuild)).not.toBe(0);
    expect(rebuild.stdout).toMatch(/topocoll: compiling the addon from source: no prebuilt binary for linux-x64 \(.*libc=musl.*\); this needs cmake/);
    expect(existsSync(join(app, 'node_modules/topocoll/build/Release/topocoll.node'))).toBe(false);
    const job = run('npx', ['topocoll', 'run', '-n', '2', 'node_modules/topocoll/examples/demo.mjs'], app, musl);
    expect(job.status, out(job)).not.toBe(0);
    expect(job.stderr).toMatch(/EINVAL: no native addon fits this machine \(.*libc=musl.*\)\. .*npm install-scripts approve topocoll && npm rebuild topocoll/);
  });

  it('compiles from source when asked (npm_config_build_from_source=true, the tools on PATH), and the compiled addon wins', () => {
    const rebuild = run(
      'npm',
      ['rebuild', 'topocoll', '--foreground-scripts'],
      app,
      env(process.env.PATH ?? '', { npm_config_build_from_source: 'true' }),
      480_000,
    );
    expect(rebuild.status, out(rebuild)).toBe(0);
    expect(rebuild.stdout).toMatch(/topocoll: compiling the addon from source: a build from source was asked for/);
    expect(rebuild.stdout).toMatch(/topocoll: compiled the addon \(build\/Release\/topocoll\.node\)/);
    expect(readdirSync(join(app, 'node_modules/topocoll/build/Release'))).toEqual(['topocoll.node']);
    // node-gyp-build, as src/native.ts calls it: the local compile before the prebuilt binary.
    const chosen = run(process.execPath, ['-e', "console.log(require('node-gyp-build').path('node_modules/topocoll'))"], app, env(nodeAlonePath));
    expect(chosen.stdout.trim()).toBe(join(app, 'node_modules/topocoll/build/Release/topocoll.node'));
    const demo = run('npx', ['topocoll', 'run', '-n', '2', 'node_modules/topocoll/examples/demo.mjs'], app, env(nodeAlonePath));
    expect(demo.status, out(demo)).toBe(0);
    expect(demo.stdout.split('\n').filter((l) => /sum 1, bcast "hello from rank 1"/.test(l))).toHaveLength(2);
  });
});
