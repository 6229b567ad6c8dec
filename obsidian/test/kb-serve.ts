// A real `kb serve` on the example vault for the integration tests: the offline provider, a
// fresh data directory (kb's embedded PostgreSQL), a free port. KB_BIN names the kb to run.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

export const KB_BIN = process.env["KB_BIN"] ?? "";
const VAULT = resolve(__dirname, "../../examples/vault");

export interface Served {
  url: string;
  token: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? done(address.port) : fail(new Error("no port"))));
    });
  });
}

export function config(): { file: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "kb-obsidian-"));
  const file = join(dir, "kb.toml");
  writeFileSync(
    file,
    [
      'owner_name = "Alex Doe"',
      `data_dir = ${JSON.stringify(join(dir, "data"))}`,
      "[[vaults]]",
      'name = "example"',
      `path = ${JSON.stringify(VAULT)}`,
      'personal = ["Alex/**"]',
      "[llm]",
      'provider = "fake"',
      'chat_model = "offline-digest"',
      'embed_model = "hash-256"',
      "",
    ].join("\n"),
  );
  return { file, dir };
}

// The example vault indexed, then served with a token until stopped.
export async function serve(token: string): Promise<Served> {
  const { file, dir } = config();
  await promisify(execFile)(KB_BIN, ["--config", file, "index", "--wait"], { timeout: 120_000 });
  const port = await freePort();
  const child: ChildProcess = spawn(KB_BIN, ["--config", file, "serve", "--port", String(port)], {
    env: { ...process.env, KB_SERVE_TOKEN: token },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let said = "";
  await new Promise<void>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`kb serve did not start: ${said}`)), 60_000);
    child.stderr?.on("data", (piece: Buffer) => {
      said += piece.toString();
      if (said.includes("kb serve: http")) {
        clearTimeout(timer);
        done();
      }
    });
    child.on("exit", (code) => fail(new Error(`kb serve exited (${code}): ${said}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    stop: async () => {
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
