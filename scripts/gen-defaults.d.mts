// Types of scripts/gen-defaults.mjs for the TypeScript that imports it (test/config/config.test.ts).
export const ROOT: string;
export const CONFIG_PATH: string;
export const PROFILE_PATH: string;
export const TS_PATH: string;
/** The generated module's text, as the committed file should read. */
export function generate(): Promise<string>;
