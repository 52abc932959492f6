import { afterAll } from 'vitest';
import { removeTempDirs } from './helpers/temp.js';

// Runs before every test file (vitest.config.ts setupFiles): the file's temporary directories
// go when the file ends, whether its tests passed or failed.
afterAll(removeTempDirs);
