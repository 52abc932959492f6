// Types of scripts/gen-abi.mjs for the TypeScript that imports it (test/abi-generated.test.ts).

/** The repository's root. */
export const ROOT: string;
/** Paths relative to the repository: the spec and the two files generated from it. */
export const SPEC_PATH: string;
export const CPP_PATH: string;
export const TS_PATH: string;

/** The generated files' text by path (relative to the repository), from the spec's text. */
export function generate(source: string): Promise<Record<string, string>>;
/** Generates from the repository's spec into `outRoot` (the repository by default); returns the paths written. */
export function writeGenerated(outRoot?: string): Promise<string[]>;
