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
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
if (process.argv[2] === '--clean') {
  rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
  process.exit(0);
}

// glibc or musl, as node-gyp-build tells them apart: node reports the glibc it runs on, and none on musl.
const libc = process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
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
const dir = join(root, 'prebuilds', `${process.platform}-${process.arch}`);
rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const file = join(dir, `node.napi.${libc}.node`);
copyFileSync(join(out, 'Release', 'topocoll.node'), file);
console.log(`topocoll: prebuilt addon ${file} (${Math.round(statSync(file).size / 1024)} KiB)`);
