import { afterEach, describe, expect, it, vi } from "vitest";
import { debounce } from "../src/debounce";
import { KbError } from "../src/errors";
import { linkTarget, setDragLink, wikiLink } from "../src/links";
import { parseAnswered, parseRelated, parseSearch, parseStatus } from "../src/parse";
import { duration, snippet, statusText } from "../src/render";
import { pickVault, readSettings } from "../src/settings";
import { EventReader } from "../src/sse";
import { DONE, RELATED, SEARCH, STATUS } from "./fixtures";

describe("parsing kb's answers", () => {
  it("reads related notes and links both ways", () => {
    const related = parseRelated(RELATED);
    expect(related.related.map((n) => n.path)).toEqual([
      "Reference/Postgres Cheatsheet.md",
      "Alex/Work Log.md",
      "People/Kenji Sato.md",
    ]);
    expect(related.related[2]?.why).toEqual(["the same writer"]);
    expect(related.linksTo[0]?.line).toBe(12);
    expect(related.linkedFrom[0]?.title).toBe("Goals 2024");
    expect(related.unresolved).toEqual([{ target: "Backups <script>", line: 20 }]);
  });

  it("reads a search, a status and a finished answer", () => {
    const found = parseSearch(SEARCH);
    expect(found.hits[0]).toMatchObject({ startLine: 15, endLine: 23, date: "2024-04-12" });
    expect(found.warnings).toHaveLength(1);
    const status = parseStatus(STATUS);
    expect(status).toEqual({
      documents: 1520,
      vectors: { items: 40, etaSeconds: 75 },
      context: { items: 300, etaSeconds: 7500 },
    });
    expect(parseAnswered(DONE).sources[1]?.startLine).toBe(15);
  });

  it("names the field kb got wrong", () => {
    expect(() => parseSearch({ hits: [{ ...SEARCH.hits[0], start_line: "15" }] })).toThrow(
      "kb's start_line is not a number",
    );
    expect(() => parseRelated([])).toThrow(KbError);
  });
});

describe("the server-sent events of an answer", () => {
  it("are read across pieces, comments left out", () => {
    const reader = new EventReader();
    expect(reader.push(": the model is still writing\n\nevent: text\nda")).toEqual([]);
    expect(reader.push('ta: "You "\n\nevent: text\r\ndata: "climbed"\r\n\r\nevent: done\n')).toEqual([
      { event: "text", data: '"You "' },
      { event: "text", data: '"climbed"' },
    ]);
    expect(reader.push("data: {}\n\n")).toEqual([{ event: "done", data: "{}" }]);
  });
});

describe("links", () => {
  it("are written as Obsidian writes them", () => {
    expect(linkTarget("Alex/Journal/2024-04-12.md")).toBe("Alex/Journal/2024-04-12");
    expect(wikiLink("Projects/Board.canvas")).toBe("[[Projects/Board.canvas]]");
    const data = new Map<string, string>();
    const transfer = { setData: (k: string, v: string) => data.set(k, v), effectAllowed: "" };
    setDragLink(transfer as unknown as DataTransfer, "People/Kenji Sato.md");
    expect(data.get("text/plain")).toBe("[[People/Kenji Sato]]");
  });
});

describe("debounce", () => {
  afterEach(() => vi.useRealTimers());

  it("calls once, with the last arguments, after the calls stop", () => {
    vi.useFakeTimers();
    const seen: number[] = [];
    const later = debounce((n: number) => seen.push(n), 100);
    later(1);
    vi.advanceTimersByTime(60);
    later(2);
    vi.advanceTimersByTime(60);
    expect(seen).toEqual([]);
    vi.advanceTimersByTime(40);
    expect(seen).toEqual([2]);
    later(3);
    later.cancel();
    vi.advanceTimersByTime(200);
    expect(seen).toEqual([2]);
  });
});

describe("the status bar", () => {
  it("says what is searchable and what is queued, with kb's ETA", () => {
    expect(statusText(parseStatus(STATUS))).toBe(
      "kb: 1520 searchable · 40 vectors queued (ETA 1 min) · 300 context queued (ETA 2 h 5 min)",
    );
    const idle = { documents: 15, vectors: { items: 0 }, enrichment: { items: 0 } };
    expect(statusText(parseStatus(idle))).toBe("kb: 15 searchable · all vectors and context done");
    expect(duration(null)).toBe("?");
    expect(duration(12.4)).toBe("12 s");
  });
});

describe("settings", () => {
  it("default to kb serve's address and unlinked notes", () => {
    expect(readSettings(null)).toMatchObject({ server: "http://127.0.0.1:8766", hideLinked: true, relatedCount: 10 });
    expect(readSettings({ token: "t" }).token).toBe("t");
  });

  it("find kb's vault by this vault's folder", () => {
    const vaults = [
      { name: "work", folder: "Work" },
      { name: "home", folder: "notes" },
    ];
    expect(pickVault(vaults, "notes", "")).toBe("home");
    expect(pickVault(vaults, "other", "")).toBeNull();
    expect(pickVault([{ name: "example", folder: "vault" }], "Vault copy", "")).toBe("example");
    expect(pickVault(vaults, "notes", "work")).toBe("work");
  });
});

describe("snippets", () => {
  it("keep whole words", () => {
    expect(snippet("a  b\n\nc")).toBe("a b c");
    expect(snippet("word ".repeat(100), 22)).toBe("word word word word…");
  });
});
