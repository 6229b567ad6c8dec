import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// The `obsidian` package ships type definitions only: the tests run against a small stub.
export default defineConfig({
  resolve: {
    alias: { obsidian: fileURLToPath(new URL("./test/obsidian-stub.ts", import.meta.url)) },
  },
  test: {
    environment: "happy-dom",
    include: ["test/**/*.test.ts"],
    testTimeout: 60000,
    hookTimeout: 120000,
  },
});
