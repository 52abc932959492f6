#!/usr/bin/env node
// Builds the prebuilt addon the package ships (run by `npm pack` and `npm publish`: the `prepack`
// script): the same CMake build as the install script's (native/CMakeLists.txt, cmake-js), in a
// directory of its own (build-prebuild/, so that no option of a local build — WERROR, sanitizers —
// reaches it), copied to
// prebuilds/<platform>-<arch>/node.napi.<libc>.node: prebuildify's layout and names, which
// node-gyp-build matches at load (src/native.ts) and at install (scripts/install.mjs). The addon
// uses Node-API 8 alone (NAPI_VERSION=8), so the one file serves every Node.js the package supports.
// It needs the build machine's glibc and libstdc++ or newer (Debian 12's: GLIBC_2.34,
// GLIBCXX_3.4.30). The C++ runtime stays dynamic on purpose: node itself links libstdc++, so every
// machine that runs node has one, while a static libstdc++ would raise the glibc it needs to 2.36
// (arc4random, _dl_find_object). Where it does not load, the install script compiles instead.
//
// prebuilds/ exists only for packing: `postpack` removes it (scripts/prebuild.mjs --clean), so a
// development checkout never holds a binary that `npm ci` would take instead of compiling.
//
// TOPOCOLL_PREBUILD_FROM=DIR: another CMake build directory of this same build (the checkout's
// build/, test/cli/package.jobs.test.ts packs a copy of the checkout) whose addon is taken instead
// of compiling again, when it is the one this script would compile: DIR's source directory holds
// the same native/CMakeLists.txt, src/ and include/ bytes as ours, DIR was configured with the
// defaults that change the code (Release, no sanitizer, cmake-js's compiler flags; warnings as
// errors change none), and its addon is newer than every one of those files. Otherwise it says
// why and compiles as without.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
if (process.argv[2] === '--clean') {
  rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
  process.exit(0);
}

// glibc or musl, as node-gyp-build tells them apart: node reports the glibc it runs on, and none on musl.
const libc = process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';

/** The files of a native/ directory the addon is compiled from: CMakeLists.txt, src/ and include/, relative paths. */
function nativeInputs(native) {
  const files = ['CMakeLists.txt'];
  for (const sub of ['src', 'include']) {
    if (!existsSync(join(native, sub))) continue;
    for (const f of readdirSync(join(native, sub), { recursive: true, withFileTypes: true })) {
      if (f.isFile()) files.push(relative(native, join(f.parentPath ?? f.path, f.name)));
    }
  }
  return files.sort();
}

/** Why the addon of build directory `dir` is not the one this script would compile, or undefined when it is. */
function notReusable(dir) {
  const addon = join(dir, 'Release', 'topocoll.node');
  if (!existsSync(addon) || !existsSync(join(dir, 'CMakeCache.txt'))) return `${addon} or its CMakeCache.txt is missing`;
  const cache = new Map();
  for (const m of readFileSync(join(dir, 'CMakeCache.txt'), 'utf8').matchAll(/^([A-Za-z_][\w.-]*):[A-Z]+=(.*)$/gm)) cache.set(m[1], m[2]);
  const defaults = {
    CMAKE_BUILD_TYPE: 'Release',
    TOPOCOLL_SANITIZE: '',
    CMAKE_CXX_FLAGS: '-DBUILDING_NODE_EXTENSION',
    CMAKE_CXX_FLAGS_RELEASE: '-O3 -DNDEBUG',
  };
  for (const [key, value] of Object.entries(defaults)) {
    if ((cache.get(key) ?? '') !== value) return `it was configured with ${key}=${cache.get(key) ?? ''}, not ${value}`;
  }
  const theirs = cache.get('CMAKE_HOME_DIRECTORY');
  const ours = join(root, 'native');
  if (theirs === undefined) return 'its CMakeCache.txt names no source directory';
  const files = nativeInputs(ours);
  if (nativeInputs(theirs).join('\n') !== files.join('\n')) return `${theirs} holds other files than ${ours}`;
  const built = statSync(addon).mtimeMs;
  for (const f of files) {
    if (!readFileSync(join(theirs, f)).equals(readFileSync(join(ours, f)))) return `${f} differs from ${join(theirs, f)}`;
    if (statSync(join(theirs, f)).mtimeMs > built) return `${join(theirs, f)} is newer than the addon`;
  }
  return undefined;
}

let built;
const from = process.env.TOPOCOLL_PREBUILD_FROM;
if (from) {
  const why = notReusable(from);
  if (why === undefined) {
    built = join(from, 'Release', 'topocoll.node');
    console.log(`topocoll: the addon of ${from} is built from these sources with the defaults: taken, not compiled again`);
  } else {
    console.log(`topocoll: compiling, not taking the addon of ${from}: ${why}`);
  }
}
if (built === undefined) {
  const cmakeJs = createRequire(join(root, 'package.json')).resolve('cmake-js/bin/cmake-js');
  const out = join(root, 'build-prebuild');
  // compile (incremental): the directory is this script's alone, so its configuration is
  // native/CMakeLists.txt's defaults.
  const r = spawnSync(process.execPath, [cmakeJs, 'compile', '--directory', 'native', '--out', out], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) {
    console.error(`topocoll: building the prebuilt addon failed (${r.error?.message ?? `exit status ${r.status}`})`);
    process.exit(1);
  }
  built = join(out, 'Release', 'topocoll.node');
}
const dir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const file = join(dir, `node.napi.${libc}.node`);
copyFileSync(built, file);
console.log(`topocoll: prebuilt addon ${file} (${Math.round(statSync(file).size / 1024)} KiB)`);
