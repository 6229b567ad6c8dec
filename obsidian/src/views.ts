// The plugin's three views: the active note's related notes and links, kb's search, and an
// answer from kb. Each asks kb when it is open, never at Obsidian's start.
import { ItemView, type WorkspaceLeaf } from "obsidian";
import type { KbClient } from "./client";
import { debounce } from "./debounce";
import { KbError } from "./errors";
import {
  type Actions,
  appendAnswerText,
  renderAnswer,
  renderHits,
  renderRelated,
  renderTrouble,
} from "./render";
import type { KbSettings } from "./settings";
import type { SearchQuery } from "./types";

export const RELATED_VIEW = "kb-related";
export const SEARCH_VIEW = "kb-search";
export const ASK_VIEW = "kb-ask";

// What the views need from the plugin.
export interface Host extends Actions {
  client: KbClient;
  settings: KbSettings;
  // kb's name for this vault, asked of kb once; null when kb holds no vault of this name.
  vault(): Promise<string | null>;
  activePath(): string | null;
}

// A saved note's new links and text reach kb's index a moment after the save.
const REFRESH_AFTER_MS = 800;

export class RelatedView extends ItemView {
  private shown: string | null = null;
  readonly refresh = debounce((force: boolean) => void this.show(force), REFRESH_AFTER_MS);
  private body!: HTMLElement;

  constructor(
    leaf: WorkspaceLeaf,
    private readonly host: Host,
  ) {
    super(leaf);
  }

  getViewType(): string {
    return RELATED_VIEW;
  }

  getDisplayText(): string {
    return "Related notes (kb)";
  }

  override getIcon(): string {
    return "network";
  }

  override async onOpen(): Promise<void> {
    this.contentEl.empty();
    this.contentEl.addClass("kb-pane");
    this.body = this.contentEl.createDiv({ cls: "kb-body" });
    await this.show(true);
  }

  override async onClose(): Promise<void> {
    this.refresh.cancel();
  }

  // The active note's related notes; a note already shown is asked again only when saved.
  async show(force: boolean): Promise<void> {
    const path = this.host.activePath();
    if (path === null) {
      this.body.setText("Open a note to see its related notes.");
      this.shown = null;
      return;
    }
    if (!force && path === this.shown) return;
    this.shown = path;
    try {
      const vault = await this.host.vault();
      if (vault === null) {
        throw new KbError("kb holds no vault of this name: name kb's vault in the kb plugin's settings", "refused");
      }
      const { relatedCount, hideLinked } = this.host.settings;
      const related = await this.host.client.related(vault, path, relatedCount, hideLinked);
      if (this.host.activePath() !== path) return; // another note meanwhile: its turn comes
      const title = path.split("/").pop()?.replace(/\.md$/i, "") ?? path;
      renderRelated(this.body, title, related, { count: relatedCount, hideLinked }, this.host);
    } catch (error) {
      this.shown = null;
      renderTrouble(this.body, error);
    }
  }
}

// The search box and kb's filters, as kb's page has them.
function queryForm(root: HTMLElement, label: string, run: (query: SearchQuery) => void): void {
  const form = root.createEl("form", { cls: "kb-form" });
  const q = form.createEl("input", { type: "search", cls: "kb-query", attr: { placeholder: label } });
  const filters = form.createEl("details", { cls: "kb-filters" });
  filters.createEl("summary", { text: "Filters" });
  const field = (name: string, placeholder: string) =>
    filters.createEl("input", { type: "text", attr: { name, placeholder } });
  const path = field("path", "Folder or note, e.g. Projects/");
  const tags = field("tags", "Tags");
  const after = field("after", "Dated from (2024-01-01)");
  const before = field("before", "Dated before");
  const mode = filters.createEl("select", { attr: { name: "mode" } });
  for (const m of ["hybrid", "text", "vector"]) mode.createEl("option", { text: m, value: m });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = q.value.trim();
    if (!text) return;
    run({
      q: text,
      path: path.value.trim(),
      tags: tags.value.trim(),
      after: after.value.trim(),
      before: before.value.trim(),
      mode: mode.value as SearchQuery["mode"],
    });
  });
}

export class SearchView extends ItemView {
  constructor(
    leaf: WorkspaceLeaf,
    private readonly host: Host,
  ) {
    super(leaf);
  }

  getViewType(): string {
    return SEARCH_VIEW;
  }

  getDisplayText(): string {
    return "Search (kb)";
  }

  override getIcon(): string {
    return "search";
  }

  override async onOpen(): Promise<void> {
    this.contentEl.empty();
    this.contentEl.addClass("kb-pane");
    const results = this.contentEl.createDiv({ cls: "kb-body" });
    queryForm(this.contentEl, "Search your notes with kb", async (query) => {
      results.setText("Searching…");
      try {
        const found = await this.host.client.search(query);
        const vault = await this.host.vault();
        // Only this vault's notes can be opened here.
        const hits = found.hits.filter((h) => vault === null || h.vault === vault);
        renderHits(results, { ...found, hits }, this.host);
      } catch (error) {
        renderTrouble(results, error);
      }
    });
    this.contentEl.append(results);
  }
}

export class AskView extends ItemView {
  private abort: AbortController | null = null;

  constructor(
    leaf: WorkspaceLeaf,
    private readonly host: Host,
  ) {
    super(leaf);
  }

  getViewType(): string {
    return ASK_VIEW;
  }

  getDisplayText(): string {
    return "Ask (kb)";
  }

  override getIcon(): string {
    return "message-circle";
  }

  override async onOpen(): Promise<void> {
    this.contentEl.empty();
    this.contentEl.addClass("kb-pane");
    const answer = this.contentEl.createDiv({ cls: "kb-body kb-answer" });
    queryForm(this.contentEl, "Ask your notes", (query) => void this.ask(query, answer));
    this.contentEl.append(answer);
  }

  override async onClose(): Promise<void> {
    // Closing the view stops its answer: kb closes the model's stream.
    this.abort?.abort();
  }

  private async ask(query: SearchQuery, root: HTMLElement): Promise<void> {
    this.abort?.abort();
    const abort = new AbortController();
    this.abort = abort;
    root.setText("Thinking…");
    let started = false;
    try {
      for await (const event of this.host.client.ask(query, abort.signal)) {
        if (event.kind === "text") {
          if (!started) root.empty();
          started = true;
          appendAnswerText(root, event.text);
        } else if (event.kind === "done") {
          renderAnswer(root, event.answer, this.host);
        } else {
          renderTrouble(root, new KbError(event.message, "refused"));
        }
      }
    } catch (error) {
      renderTrouble(root, error);
    }
  }
}
