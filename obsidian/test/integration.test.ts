// @vitest-environment node
// The plugin's client against a real `kb serve` (see kb-serve.ts), as the app calls it: plain
// GETs without an Origin (Obsidian's requestUrl), the answer with the app's fetch
// (Origin: app://obsidian.md).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Get, KbClient, type Stream } from "../src/client";
import { KbError } from "../src/errors";
import type { AskEvent } from "../src/types";
import { KB_BIN, type Served, freePort, serve } from "./kb-serve";

const APP = "app://obsidian.md";

const get: Get = async (url, headers) => {
  const reply = await fetch(url, { headers });
  return { status: reply.status, text: await reply.text() };
};

function appStream(origin: string, seen?: Headers[]): Stream {
  return async (url, headers, signal) => {
    // As Chromium sends it from the app's page to another origin.
    const reply = await fetch(url, {
      headers: { ...headers, Origin: origin, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors" },
      signal,
    });
    seen?.push(reply.headers);
    return reply;
  };
}

async function all(events: AsyncIterable<AskEvent>): Promise<AskEvent[]> {
  const out: AskEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

async function failure(run: () => Promise<unknown>): Promise<KbError> {
  try {
    await run();
  } catch (error) {
    if (error instanceof KbError) return error;
    throw error;
  }
  throw new Error("no error");
}

describe.skipIf(!KB_BIN)("the plugin's client against kb serve", () => {
  let kb: Served;
  let client: KbClient;
  const seen: Headers[] = [];

  beforeAll(async () => {
    kb = await serve("obsidian-s3cret");
    client = new KbClient(() => ({ server: kb.url, token: kb.token }), get, appStream(APP, seen));
  });

  afterAll(async () => {
    await kb?.stop();
  });

  it("reads the status for the status bar", async () => {
    const status = await client.status();
    expect(status.documents).toBe(15);
    expect(status.vectors.items).toBe(0);
  });

  it("finds this vault by its folder", async () => {
    expect(await client.vaults()).toEqual([{ name: "example", folder: "vault" }]);
  });

  it("searches with filters, each hit at its vault-relative path and lines", async () => {
    const found = await client.search({ q: "when did I climb a mountain", path: "Alex/" });
    expect(found.hits.length).toBeGreaterThan(0);
    for (const hit of found.hits) expect(hit.path.startsWith("Alex/")).toBe(true);
    expect(found.hits[0]?.path).toBe("Alex/Journal/2024-04-12.md");
    expect(found.hits[0]?.startLine).toBeGreaterThan(0);
    const text = await client.search({ q: "postgres upgrade", mode: "text", topK: 2 });
    expect(text.hits).toHaveLength(2);
    expect(text.modeUsed).toBe("text");
  });

  it("streams an answer from the app's origin, its sources at their lines", async () => {
    const events = await all(client.ask({ q: "when did I climb a mountain" }));
    const last = events[events.length - 1];
    expect(last?.kind).toBe("done");
    if (last?.kind !== "done") return;
    expect(last.answer.sources.length).toBeGreaterThan(0);
    expect(last.answer.sources[0]?.path).toMatch(/\.md$/);
    expect(seen[seen.length - 1]?.get("access-control-allow-origin")).toBe(APP);
  });

  it("shows a note's related notes, unlinked, and who links to it", async () => {
    const note = "Projects/Billing Anomaly Detection.md";
    const related = await client.related("example", note, 5, true);
    expect(related.related.length).toBeGreaterThan(0);
    expect(related.related.length).toBeLessThanOrEqual(5);
    const linksTo = new Set(related.linksTo.map((n) => n.path));
    expect(linksTo.has("Alex/Work Log.md")).toBe(true);
    for (const found of related.related) {
      expect(found.path).not.toBe(note);
      expect(linksTo.has(found.path)).toBe(false); // unlinked
      expect(found.why.length).toBeGreaterThan(0);
    }
    expect(related.linkedFrom.map((n) => n.path).sort()).toEqual([
      "Alex/Work Log.md",
      "Meetings/2024-05-06 Planning.md",
    ]);
    const all = await client.related("example", note, 50, false);
    expect(all.related.some((n) => linksTo.has(n.path))).toBe(true);
  });

  it("gets nothing without the token, and says so", async () => {
    const stranger = new KbClient(() => ({ server: kb.url, token: "" }), get, appStream(APP));
    expect((await failure(() => stranger.status())).trouble).toBe("token");
    expect((await failure(() => all(stranger.ask({ q: "mountain" })))).trouble).toBe("token");
    const wrong = new KbClient(() => ({ server: kb.url, token: "guess" }), get, appStream(APP));
    expect((await failure(() => wrong.search({ q: "mountain" }))).trouble).toBe("token");
  });

  it("refuses another site's origin, even with the token", async () => {
    const evil = new KbClient(() => ({ server: kb.url, token: kb.token }), get, appStream("https://evil.example"));
    const error = await failure(() => all(evil.ask({ q: "mountain" })));
    expect(error.trouble).toBe("refused");
    expect(error.message).toBe("requests from another site's page are refused");
  });
});

describe("kb serve down", () => {
  it("is one line with the command that starts it", async () => {
    const server = `http://127.0.0.1:${await freePort()}`;
    const client = new KbClient(() => ({ server, token: "" }), get, appStream(APP));
    const error = await failure(() => client.status());
    expect(error.trouble).toBe("unreachable");
    expect(error.message).toContain(`kb is not running at ${server}: start it with \`kb serve\``);
    expect((await failure(() => all(client.ask({ q: "x" })))).trouble).toBe("unreachable");
  });
});
