#!/usr/bin/env node
// The package's `install` script: makes sure an addon fits this machine, then builds the optional
// topocoll/mpi addon (scripts/build-mpi.mjs, which never fails an install).
//
// The main addon is compiled (cmake-js, into build/) only when
// - the package ships no prebuilt binary that fits and loads here (prebuilds/ is made by
//   `npm pack` alone, scripts/prebuild.mjs: a development checkout has none, so `npm ci` there
//   always compiles, with npm's `cmake_*` settings passed on as CMake definitions), or
// - it is asked for: npm_config_build_from_source=true (`npm install --build-from-source`), as
//   with other packages that ship prebuilds.
// It prints which it did. A prebuilt binary that fits by its tags but does not load (a glibc
// older than the build machine's) counts as none: it is compiled instead. A compile that fails
// fails the install, with cmake-js's output above the last line.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(join(root, 'package.json'));

/** Why the shipped binary cannot serve, or undefined when it can (then it is loaded once here). */
function prebuiltUnfit() {
  if (process.env.npm_config_build_from_source === 'true') return 'a build from source was asked for (npm_config_build_from_source)';
  // node-gyp-build looks at build/ before prebuilds/; here only prebuilds/ counts, so that a
  // leftover build/ neither hides a prebuilt binary nor stands in for one.
  process.env.PREBUILDS_ONLY = '1';
  let path;
  try {
    path = require('node-gyp-build').path(root);
  } catch (e) {
    return `no prebuilt binary for ${process.platform}-${process.arch} (${e.message.split('\n')[0].replace(/^No native build was found for /, '')})`;
  } finally {
    delete process.env.PREBUILDS_ONLY;
  }
  try {
    require(path);
  } catch (e) {
    return `the prebuilt ${relative(root, path)} does not load here (${e.message.split('\n')[0]})`;
  }
  console.log(`topocoll: using the prebuilt addon ${relative(root, path)} (no compile; npm_config_build_from_source=true compiles instead)`);
  return undefined;
}

/** Runs a node script of a dependency or of this package; exits the install with its status when it fails. */
function run(script, args) {
  const r = spawnSync(process.execPath, [script, ...args], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const reason = prebuiltUnfit();
if (reason !== undefined) {
  console.log(`topocoll: compiling the addon from source: ${reason}; this needs cmake and a C++17 compiler`);
  run(require.resolve('cmake-js/bin/cmake-js'), ['compile', '--directory', 'native', '--out', 'build']);
  console.log('topocoll: compiled the addon (build/Release/topocoll.node)');
}
run(join(root, 'scripts', 'build-mpi.mjs'), []);
