#!/usr/bin/env node
// Builds the optional addon topocoll/mpi (native/mpi → build/mpi/Release/topocoll_mpi.node).
// Run by `npm install` after the main addon, and by `npm run build:mpi`; arguments are passed to
// cmake-js (e.g. --CDTOPOCOLL_WERROR=ON), but for `--mpi NAME`: build against the MPI whose C
// compiler wrapper is `mpicc.NAME` (Debian's names: mpicc.mpich, mpicc.openmpi) instead of
// `mpicc`, into build/NAME/Release/topocoll_mpi.node, which TOPOCOLL_MPI_ADDON then loads
// (src/mpi.ts). The default build is left as it is.
//
// The main addon must install whatever happens here: without an MPI library this prints one line
// and exits 0, and a failed build says so and exits 0 too — unless TOPOCOLL_REQUIRE_MPI=1, when
// both exit 1 (CI, and users who need the MPI layer). Nothing is downloaded: cmake-js compiles
// against the Node headers already on the machine, as for the main addon.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const required = process.env.TOPOCOLL_REQUIRE_MPI === '1';

/** `--mpi NAME` (or `--mpi=NAME`) taken out of the arguments; the rest go to cmake-js. */
function parseArgs(args) {
  const extra = [];
  let mpi;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--mpi' || arg.startsWith('--mpi=')) {
      mpi = arg === '--mpi' ? args[++i] : arg.slice('--mpi='.length);
      // A plain name: it becomes a directory under build/ and a suffix of mpicc.
      if (mpi === undefined || !/^[a-z0-9][a-z0-9_-]*$/i.test(mpi)) {
        console.error(`topocoll: --mpi wants a name like mpich or openmpi (for mpicc.<name>), got ${mpi ?? 'nothing'}`);
        process.exit(2);
      }
    } else {
      extra.push(arg);
    }
  }
  return { mpi, extra };
}
const { mpi, extra: extraArgs } = parseArgs(process.argv.slice(2));

/** Ends the script: exit 0 unless MPI is required. */
function giveUp(message) {
  console.log(message);
  process.exit(required ? 1 : 0);
}

/** The path of an executable `name` on PATH, or undefined. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/** Whether CMake's FindMPI finds MPI's C bindings (MPI installed without mpicc on PATH, MPI_HOME set). */
function findMpiProbe() {
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-mpi-probe-'));
  try {
    writeFileSync(
      join(dir, 'CMakeLists.txt'),
      'cmake_minimum_required(VERSION 3.15)\nproject(probe LANGUAGES C)\nfind_package(MPI COMPONENTS C)\nif(NOT MPI_C_FOUND)\n  message(FATAL_ERROR "no MPI")\nendif()\n',
    );
    const r = spawnSync('cmake', ['-S', dir, '-B', join(dir, 'build')], { stdio: 'ignore', timeout: 60_000 });
    return r.status === 0;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --mpi NAME: CMake's FindMPI asks that wrapper (MPI_C_COMPILER) for its headers and libraries.
const mpiArgs = [];
if (mpi !== undefined) {
  const wrapper = onPath(`mpicc.${mpi}`);
  if (wrapper === undefined) giveUp(`topocoll: mpicc.${mpi} is not on PATH, so topocoll/mpi is not built against ${mpi}`);
  mpiArgs.push(`--CDMPI_C_COMPILER=${wrapper}`);
} else if (!onPath('mpicc') && !findMpiProbe()) {
  giveUp('topocoll: no MPI library found (mpicc), so topocoll/mpi is not built; install Open MPI or MPICH and run npm run build:mpi');
}
const outDir = join('build', mpi ?? 'mpi');

// The Node headers: npm passes its `nodedir` setting to install scripts (npm_config_nodedir),
// and cmake-js uses it. Run directly (node scripts/build-mpi.mjs) there is none, and cmake-js
// would download the headers; the headers of the running node, where its installation has
// them (<prefix>/include/node), serve instead.
const env = { ...process.env };
if (!env.npm_config_nodedir) {
  const prefix = dirname(dirname(process.execPath));
  if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) env.npm_config_nodedir = prefix;
}

let cmakeJs;
try {
  cmakeJs = createRequire(join(root, 'package.json')).resolve('cmake-js/bin/cmake-js');
} catch {
  giveUp('topocoll: cmake-js is not installed, so topocoll/mpi is not built; run npm install, then npm run build:mpi');
}

// cmake-js compile configures only a build directory that has none yet, so options given here
// (--CD…) would not reach one that exists: with options, rebuild (configure afresh).
const verb = extraArgs.some((a) => a.startsWith('--CD')) ? 'rebuild' : 'compile';
const r = spawnSync(process.execPath, [cmakeJs, verb, '--directory', join(root, 'native', 'mpi'), '--out', join(root, outDir), ...mpiArgs, ...extraArgs], {
  cwd: root,
  env,
  stdio: 'inherit',
});
if (r.status !== 0) {
  giveUp(
    `topocoll: building topocoll/mpi failed (${r.error ? r.error.message : r.signal ? `signal ${r.signal}` : `exit status ${r.status}`}; see the output above). ` +
      'The main addon is installed; topocoll/mpi is unavailable until "npm run build:mpi" succeeds.',
  );
}
const built = join(outDir, 'Release', 'topocoll_mpi.node');
console.log(`topocoll: built topocoll/mpi (${built}${mpi === undefined ? '' : `; load it with TOPOCOLL_MPI_ADDON=${built}`})`);
