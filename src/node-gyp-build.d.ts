// node-gyp-build (CommonJS) ships no types; the part src/native.ts calls. Only compile-time: no
// published declaration refers to it, so consumers of topocoll need none of this.
declare module 'node-gyp-build' {
  interface NodeGypBuild {
    (dir: string): unknown;
    /** The addon file that fits this process under `dir` (build/Release, build/Debug, then prebuilds/); throws when none does. */
    path(dir: string): string;
  }
  const nodeGypBuild: NodeGypBuild;
  export default nodeGypBuild;
}
