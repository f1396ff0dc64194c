import { defineConfig } from "vite";

// The bundle is package data of tidelog.console (served by the Python app at /).
export default defineConfig({
  base: "/",
  build: {
    outDir: "../../src/tidelog/console/static",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1000,
  },
  server: { proxy: { "/api": "http://127.0.0.1:8080" } },
});
