import { describe, expect, it } from "vitest";
import { KbError } from "../src/errors";
import { parseAnswered, parseRelated, parseSearch } from "../src/parse";
import { renderAnswer, renderHits, renderRelated, renderTrouble } from "../src/render";
import { DONE, RELATED, SEARCH } from "./fixtures";

function actions() {
  const opened: [string, number | undefined][] = [];
  return { opened, open: (path: string, line?: number) => opened.push([path, line]) };
}

const texts = (root: HTMLElement, selector: string) =>
  [...root.querySelectorAll(selector)].map((e) => e.textContent);

describe("the related pane", () => {
  it("shows unlinked related notes with why and score, who links here, unresolved links", () => {
    const root = document.createElement("div");
    const act = actions();
    renderRelated(root, "Home Server", parseRelated(RELATED), { count: 10, hideLinked: true }, act);
    // The cheatsheet is linked to already: hidden by default.
    expect(texts(root, ".kb-section:first-of-type .kb-note")).toEqual(["Work Log", "Kenji Sato"]);
    expect(texts(root, ".kb-why")).toEqual(["mentions its title: 'Home Server'", "the same writer"]);
    expect(texts(root, ".kb-score")).toEqual(["0.50", "0.31"]);
    expect(texts(root, ".kb-section-title")).toEqual([
      "Related, not linked2",
      "Linked from1",
      "Unresolved links1",
    ]);
    // Text stays text.
    expect(root.querySelector("script")).toBeNull();
    expect(texts(root, ".kb-unresolved")[0]).toBe("[[Backups <script>]]line 20");
    (root.querySelector('[data-path="Alex/Goals 2024.md"]') as HTMLElement).click();
    (root.querySelector('[data-path="Alex/Work Log.md"]') as HTMLElement).click();
    expect(act.opened).toEqual([
      ["Alex/Goals 2024.md", 7],
      ["Alex/Work Log.md", undefined],
    ]);
  });

  it("shows linked notes too when asked, at most as many as set", () => {
    const root = document.createElement("div");
    renderRelated(root, "Home Server", parseRelated(RELATED), { count: 2, hideLinked: false }, actions());
    expect(texts(root, ".kb-section:first-of-type .kb-note")).toEqual(["Postgres Cheatsheet", "Work Log"]);
  });

  it("drags a note as a [[link]]", () => {
    const root = document.createElement("div");
    renderRelated(root, "Home Server", parseRelated(RELATED), { count: 10, hideLinked: true }, actions());
    const link = root.querySelector('[data-path="People/Kenji Sato.md"]') as HTMLElement;
    expect(link.draggable).toBe(true);
    const data = new Map<string, string>();
    const event = new Event("dragstart") as DragEvent;
    Object.defineProperty(event, "dataTransfer", {
      value: { setData: (k: string, v: string) => data.set(k, v), effectAllowed: "" },
    });
    link.dispatchEvent(event);
    expect(data.get("text/plain")).toBe("[[People/Kenji Sato]]");
  });
});

describe("search results", () => {
  it("open the note at the passage's line", () => {
    const root = document.createElement("div");
    const act = actions();
    renderHits(root, parseSearch(SEARCH), act);
    expect(texts(root, ".kb-note")).toEqual(["The climb"]);
    expect(texts(root, ".kb-path")).toEqual(["Alex/Journal/2024-04-12.md:15-23"]);
    expect(root.querySelector(".kb-snippet")?.textContent).toContain("<b>view</b>");
    expect(root.querySelector("b")).toBeNull();
    expect(texts(root, ".kb-warning")).toHaveLength(1);
    (root.querySelector(".kb-note") as HTMLElement).click();
    expect(act.opened).toEqual([["Alex/Journal/2024-04-12.md", 15]]);
  });
});

describe("an answer", () => {
  it("turns its citations into links to the cited lines", () => {
    const root = document.createElement("div");
    const act = actions();
    renderAnswer(root, parseAnswered(DONE), act);
    expect(root.querySelector(".kb-answer-text")?.textContent).toBe(
      "You climbed Mount Takao [1][2] in April [3].",
    );
    expect(texts(root, ".kb-citation")).toEqual(["[1]", "[2]"]);
    (root.querySelectorAll(".kb-citation")[1] as HTMLElement).click();
    expect(act.opened).toEqual([["Alex/Journal/2024-04-12.md", 15]]);
    expect(texts(root, ".kb-sources .kb-path")).toEqual([
      "Alex/Journal/2024-04-12.md:7-9",
      "Alex/Journal/2024-04-12.md:15-23",
    ]);
  });

  it("says when the notes do not hold it", () => {
    const root = document.createElement("div");
    renderAnswer(root, parseAnswered({ ...DONE, not_in_notes: true, text: "Not in your notes.", sources: [] }), actions());
    expect(root.querySelector(".kb-verdict")?.textContent).toBe("Not in your notes");
  });
});

it("a trouble is one line, marked for what it is", () => {
  const root = document.createElement("div");
  renderTrouble(root, new KbError("kb is not running", "unreachable"));
  expect(root.querySelector("[role=alert]")?.getAttribute("data-trouble")).toBe("unreachable");
});
