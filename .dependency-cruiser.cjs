// No import cycles in src/ (npm run lint): type-only imports count, since a cycle of types still
// ties two modules into one. See docs/architecture.md, "Modules".
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A module must not import itself through others, types included.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Resolve '.js' specifiers to the '.ts' sources, and keep `import type` edges.
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },
};
