import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['./test/setup.ts'],
    // The suite's tests spawn apps that share one awsworld server: one file, its tests one after another.
    fileParallelism: false,
  },
});
