// Bundles what `import 'topocoll'` and `import 'topocoll/mpi'` load into dist/bundle/ (run by
// `npm run build` after tsc). A rank's start is mostly module loading: the compiled modules and
// their dependencies are about 280 files, each resolved, read and compiled by Node's ESM loader;
// one file loads in well under half that time, and every rank of every job pays it.
//
// Invariants the library keeps for this to work:
// - files of the package are found from PACKAGE_ROOT (src/util/package-root.ts), which is two
//   directories above dist/bundle/ as above dist/util/;
// - the rendezvous server's worker is an entry point named worker.js, the name host.ts asks for
//   beside itself;
// - mpi.js is an entry point and also init's dynamic import: with splitting, both are the same
//   file, so a process holds one copy of topocoll/mpi's state whichever way it came in;
// - no module here awaits at its top level: CommonJS consumers require() these ES modules
//   (Node.js >= 20.19), which fails for a graph with a top-level await
//   (test/cli/package.jobs.test.ts). Hence no second, CommonJS build, which would load a second
//   copy of the library's state beside the first (docs/guide/install.md).
// The CLI runs from a bundle of its own, dist/cli-bundle/ (cli.js, which dist/cli/main.js imports;
// src/cli/bundle-entry.ts), two directories below the package root too, its rendezvous worker
// beside it: a separate build, so that what `import 'topocoll'` loads stays one file. No CLI
// process loads the library's bundle; the files the CLI starts (the workers of bench and tune,
// the cluster agent) are dist/cli/ files found from PACKAGE_ROOT and run the compiled modules.
// A process loads one of the two bundles or the compiled modules, never two of them.
import { build } from 'esbuild';
import { rmSync } from 'node:fs';

const outdir = 'dist/bundle';
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: { index: 'dist/index.js', mpi: 'dist/mpi.js', worker: 'dist/runtime/rendezvous/worker.js' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outdir,
  chunkNames: 'chunk-[hash]',
  sourcemap: 'linked',
  logLevel: 'warning',
  // yaml is CommonJS and requires Node's built-ins; an ES module has no `require` of its own.
  banner: { js: "import { createRequire as topocollCreateRequire } from 'node:module'; const require = topocollCreateRequire(import.meta.url);" },
});

const cliOutdir = 'dist/cli-bundle';
rmSync(cliOutdir, { recursive: true, force: true });
await build({
  entryPoints: { cli: 'dist/cli/bundle-entry.js', worker: 'dist/runtime/rendezvous/worker.js' },
  bundle: true,
  // Each command's modules in chunks of their own, loaded when it runs (src/cli/run-cli.ts).
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outdir: cliOutdir,
  chunkNames: 'chunk-[hash]',
  // Whitespace and syntax only (names kept): a third smaller in the tarball, and less to parse.
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  logLevel: 'warning',
  banner: { js: "import { createRequire as topocollCreateRequire } from 'node:module'; const require = topocollCreateRequire(import.meta.url);" },
});
