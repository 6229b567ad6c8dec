// Bundles the plugin into main.js, as Obsidian loads it: CommonJS, with `obsidian` (and the
// editor's packages) left to the app, which provides them.
import { build } from "esbuild";

await build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  format: "cjs",
  platform: "browser",
  target: "es2022",
  external: ["obsidian", "electron", "@codemirror/*", "@lezer/*"],
  outfile: "main.js",
  minify: true,
  sourcemap: false,
  logLevel: "warning",
});
