import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Multi-process and CLI tests spawn real processes; give them room on a 2-core machine.
    testTimeout: 60_000,
    // No retries: a flaky test is a bug to fix, not to hide.
    retry: 0,
  },
});
