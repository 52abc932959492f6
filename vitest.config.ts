import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Removes the directories each test file made with tempDir (test/helpers/temp.ts) when it ends.
    setupFiles: ['test/setup.ts'],
    // Multi-process and CLI tests spawn real processes; give them room on a 2-core machine.
    testTimeout: 60_000,
    // No retries: a flaky test is a bug to fix, not to hide.
    retry: 0,
  },
});
