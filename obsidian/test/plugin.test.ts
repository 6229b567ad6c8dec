// The glue, against the stub of Obsidian: loading registers and asks nothing; the pane asks
// kb for the active note once the layout is ready, and opens notes at their line.
import { beforeEach, describe, expect, it } from "vitest";
// The stub itself: `obsidian` resolves to it (vitest.config.ts), typed as the real API.
import { App, TFile, WorkspaceLeaf, calls } from "./obsidian-stub";
import { KbClient } from "../src/client";
import KbPlugin from "../src/main";
import { AskView, RelatedView, RELATED_VIEW, SearchView } from "../src/views";
import { DONE, RELATED, SEARCH } from "./fixtures";

beforeEach(() => {
  calls.length = 0;
});

describe("the plugin", () => {
  it("registers its views at load and asks kb nothing until the layout is ready", async () => {
    const app = new App();
    const plugin = new KbPlugin(app as never, {} as never);
    await plugin.onload();
    const stub = plugin as unknown as { views: Map<string, unknown>; statusItems: HTMLElement[] };
    expect([...stub.views.keys()]).toEqual(["kb-related", "kb-search", "kb-ask"]);
    expect(calls).toEqual([]);
    expect(stub.statusItems).toEqual([]);
    for (const ready of app.workspace.layoutReady) ready();
    await new Promise((r) => setTimeout(r, 10));
    expect(calls.map((c) => new URL(c.url).pathname)).toEqual(["/api/status"]);
    // kb serve down: the status bar says so, with the command that starts it.
    expect(stub.statusItems[0]?.textContent).toBe("kb: not running");
    expect(stub.statusItems[0]?.getAttribute("title")).toContain("start it with `kb serve`");
  });

  it("shows the active note's related notes and opens one at its line", async () => {
    const app = new App();
    const plugin = new KbPlugin(app as never, {} as never);
    await plugin.onload();
    const asked: string[] = [];
    plugin.client = new KbClient(
      () => plugin.settings,
      async (url) => {
        asked.push(url);
        const path = new URL(url).pathname;
        const body = path === "/api/vaults" ? { vaults: [{ name: "example", folder: "vault" }] } : RELATED;
        return { status: 200, text: JSON.stringify(body) };
      },
      async () => new Response(""),
    );
    const goals = new TFile("Alex/Goals 2024.md");
    app.vault.files.set(goals.path, goals);
    app.workspace.active = new TFile("Projects/Home Server.md");
    const leaf = new WorkspaceLeaf();
    const view = new RelatedView(leaf as never, plugin);
    expect(view.getViewType()).toBe(RELATED_VIEW);
    await view.onOpen();
    const related = new URL(asked[1] ?? "");
    expect(related.pathname).toBe("/api/related");
    expect(Object.fromEntries(related.searchParams)).toEqual({
      vault: "example",
      path: "Projects/Home Server.md",
      top_k: "10",
      unlinked: "1",
    });
    expect(view.contentEl.querySelector(".kb-pane-note")?.textContent).toBe("Home Server");
    (view.contentEl.querySelector('[data-path="Alex/Goals 2024.md"]') as HTMLElement).click();
    await new Promise((r) => setTimeout(r, 0));
    expect(app.workspace.main.opened).toEqual([{ file: goals, state: { eState: { line: 6 } } }]);
    // The same note again, unsaved: not asked again.
    await view.show(false);
    expect(asked).toHaveLength(2);
  });
});

describe("the search and ask views", () => {
  function host(asked: string[]) {
    const app = new App();
    const plugin = new KbPlugin(app as never, {} as never);
    const events = ['event: text\ndata: "You climbed "\n\n', ": still writing\n\n", `event: done\ndata: ${JSON.stringify(DONE)}\n\n`];
    plugin.client = new KbClient(
      () => plugin.settings,
      async (url) => {
        asked.push(url);
        const path = new URL(url).pathname;
        const body = path === "/api/vaults" ? { vaults: [{ name: "example", folder: "vault" }] } : SEARCH;
        return { status: 200, text: JSON.stringify(body) };
      },
      async (url) => {
        asked.push(url);
        return new Response(new Blob(events).stream(), { status: 200 });
      },
    );
    return plugin;
  }

  function submit(view: { contentEl: HTMLElement }, text: string, path = "") {
    (view.contentEl.querySelector(".kb-query") as HTMLInputElement).value = text;
    (view.contentEl.querySelector('input[name="path"]') as HTMLInputElement).value = path;
    view.contentEl.querySelector("form")?.dispatchEvent(new Event("submit"));
  }

  it("search sends the filters and lists this vault's hits", async () => {
    const asked: string[] = [];
    const view = new SearchView(new WorkspaceLeaf() as never, host(asked));
    await view.onOpen();
    submit(view, "mountain", "Alex/");
    await new Promise((r) => setTimeout(r, 20));
    const search = new URL(asked[0] ?? "");
    expect(Object.fromEntries(search.searchParams)).toEqual({ q: "mountain", path: "Alex/", mode: "hybrid" });
    expect(view.contentEl.querySelector(".kb-path")?.textContent).toBe("Alex/Journal/2024-04-12.md:15-23");
  });

  it("ask streams the answer in, then links its citations", async () => {
    const asked: string[] = [];
    const view = new AskView(new WorkspaceLeaf() as never, host(asked));
    await view.onOpen();
    submit(view, "when did I climb a mountain");
    await new Promise((r) => setTimeout(r, 50));
    expect(new URL(asked[0] ?? "").pathname).toBe("/api/ask");
    expect(view.contentEl.querySelector(".kb-answer-text")?.textContent).toBe(DONE.text.replace("[1, 2]", "[1][2]"));
    expect(view.contentEl.querySelectorAll(".kb-citation")).toHaveLength(2);
  });
});
