// The glue, against the stub of Obsidian: loading registers and asks nothing; the pane asks
// kb for the active note once the layout is ready, and opens notes at their line.
import { beforeEach, describe, expect, it } from "vitest";
// The stub itself: `obsidian` resolves to it (vitest.config.ts), typed as the real API.
import { App, TFile, WorkspaceLeaf, calls } from "./obsidian-stub";
import { KbClient } from "../src/client";
import KbPlugin from "../src/main";
import { RelatedView, RELATED_VIEW } from "../src/views";
import { RELATED } from "./fixtures";

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
