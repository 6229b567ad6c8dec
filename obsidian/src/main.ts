// kb inside Obsidian: the glue between the app and the plugin's parts. Loading registers the
// views, the commands and the settings; kb is first asked once the layout is ready.
import {
  type App,
  MarkdownView,
  Notice,
  Plugin,
  PluginSettingTab,
  Setting,
  TFile,
  requestUrl,
} from "obsidian";
import { type Get, KbClient, type Stream } from "./client";
import { KbError } from "./errors";
import { statusText } from "./render";
import { DEFAULT_SETTINGS, type KbSettings, pickVault, readSettings } from "./settings";
import { ASK_VIEW, AskView, type Host, RELATED_VIEW, RelatedView, SEARCH_VIEW, SearchView } from "./views";

const STATUS_EVERY_MS = 10_000;

// Obsidian's requestUrl: no CORS, no browser Origin. It throws when nothing answers.
const get: Get = async (url, headers) => {
  const reply = await requestUrl({ url, headers, throw: false });
  return { status: reply.status, text: reply.text };
};

// The answer streams, which requestUrl cannot: the app's fetch (Origin app://obsidian.md).
const stream: Stream = (url, headers, signal) => fetch(url, { headers, signal });

export default class KbPlugin extends Plugin implements Host {
  override settings: KbSettings = DEFAULT_SETTINGS;
  client = new KbClient(() => this.settings, get, stream);
  private vaultName: Promise<string | null> | null = null;
  private statusBar: HTMLElement | null = null;
  private warned = false;

  override async onload(): Promise<void> {
    this.settings = readSettings(await this.loadData());
    this.registerView(RELATED_VIEW, (leaf) => new RelatedView(leaf, this));
    this.registerView(SEARCH_VIEW, (leaf) => new SearchView(leaf, this));
    this.registerView(ASK_VIEW, (leaf) => new AskView(leaf, this));
    this.addCommand({ id: "open-related", name: "Open related notes", callback: () => this.reveal(RELATED_VIEW) });
    this.addCommand({ id: "open-search", name: "Search", callback: () => this.reveal(SEARCH_VIEW) });
    this.addCommand({ id: "open-ask", name: "Ask", callback: () => this.reveal(ASK_VIEW) });
    this.addRibbonIcon("network", "kb: related notes", () => this.reveal(RELATED_VIEW));
    this.addSettingTab(new KbSettingTab(this.app, this));
    this.app.workspace.onLayoutReady(() => this.ready());
  }

  private ready(): void {
    this.statusBar = this.addStatusBarItem();
    this.statusBar.addClass("kb-status");
    void this.refreshStatus();
    this.registerInterval(window.setInterval(() => void this.refreshStatus(), STATUS_EVERY_MS));
    this.registerEvent(this.app.workspace.on("active-leaf-change", () => this.refreshRelated(false)));
    this.registerEvent(
      this.app.vault.on("modify", (file) => {
        if (file.path === this.activePath()) this.refreshRelated(true);
      }),
    );
  }

  async refreshStatus(): Promise<void> {
    if (this.statusBar === null) return;
    try {
      this.statusBar.setText(statusText(await this.client.status()));
      this.statusBar.removeClass("kb-status-down");
      this.warned = false;
    } catch (error) {
      const message = error instanceof KbError ? error.message : String(error);
      this.statusBar.setText(error instanceof KbError && error.trouble === "unreachable" ? "kb: not running" : "kb: ?");
      this.statusBar.setAttr("title", message);
      this.statusBar.addClass("kb-status-down");
      if (!this.warned) new Notice(message, 10_000);
      this.warned = true;
      this.vaultName = null; // kb may come back with other vaults
    }
  }

  private refreshRelated(force: boolean): void {
    for (const leaf of this.app.workspace.getLeavesOfType(RELATED_VIEW)) {
      if (leaf.view instanceof RelatedView) leaf.view.refresh(force);
    }
  }

  vault(): Promise<string | null> {
    this.vaultName ??= this.client
      .vaults()
      .then((vaults) => pickVault(vaults, this.app.vault.getName(), this.settings.vault))
      .catch((error: unknown) => {
        this.vaultName = null;
        throw error;
      });
    return this.vaultName;
  }

  activePath(): string | null {
    const file = this.app.workspace.getActiveFile();
    return file?.extension === "md" ? file.path : null;
  }

  open(path: string, line?: number): void {
    const file = this.app.vault.getAbstractFileByPath(path);
    if (!(file instanceof TFile)) {
      new Notice(`kb: ${path} is not in this vault`);
      return;
    }
    const leaf = this.app.workspace.getLeaf(false);
    // Obsidian scrolls a note to eState.line (0-based) when it opens it.
    const eState = line === undefined ? undefined : { line: Math.max(0, line - 1) };
    void leaf.openFile(file, { eState }).then(() => {
      const view = leaf.view;
      if (line !== undefined && view instanceof MarkdownView) {
        view.editor.setCursor({ line: line - 1, ch: 0 });
      }
    });
  }

  private async reveal(type: string): Promise<void> {
    const { workspace } = this.app;
    let leaf = workspace.getLeavesOfType(type)[0];
    if (!leaf) {
      const side = workspace.getRightLeaf(false);
      if (!side) return;
      await side.setViewState({ type, active: true });
      leaf = side;
    }
    await workspace.revealLeaf(leaf);
  }

  async saveSettings(): Promise<void> {
    await this.saveData(this.settings);
    this.vaultName = null;
    this.warned = false;
    void this.refreshStatus();
    this.refreshRelated(true);
  }
}

class KbSettingTab extends PluginSettingTab {
  constructor(
    app: App,
    private readonly plugin: KbPlugin,
  ) {
    super(app, plugin);
  }

  override display(): void {
    const { containerEl } = this;
    const settings = this.plugin.settings;
    const save = () => void this.plugin.saveSettings();
    containerEl.empty();
    new Setting(containerEl)
      .setName("Server address")
      .setDesc("Where `kb serve` listens.")
      .addText((text) =>
        text.setPlaceholder(DEFAULT_SETTINGS.server).setValue(settings.server).onChange((value) => {
          settings.server = value.trim() || DEFAULT_SETTINGS.server;
          save();
        }),
      );
    new Setting(containerEl)
      .setName("Token")
      .setDesc("KB_SERVE_TOKEN, when kb serve was started with one.")
      .addText((text) => {
        text.inputEl.type = "password";
        text.setValue(settings.token).onChange((value) => {
          settings.token = value.trim();
          save();
        });
      });
    new Setting(containerEl)
      .setName("Related notes")
      .setDesc("How many related notes the pane shows.")
      .addSlider((slider) =>
        slider.setLimits(1, 50, 1).setValue(settings.relatedCount).setDynamicTooltip().onChange((value) => {
          settings.relatedCount = value;
          save();
        }),
      );
    new Setting(containerEl)
      .setName("Hide linked notes")
      .setDesc("Leave out the related notes this note already links to or from.")
      .addToggle((toggle) =>
        toggle.setValue(settings.hideLinked).onChange((value) => {
          settings.hideLinked = value;
          save();
        }),
      );
    new Setting(containerEl)
      .setName("kb vault")
      .setDesc("kb's name for this vault; empty: the one kept from a folder of this vault's name.")
      .addText((text) =>
        text.setValue(settings.vault).onChange((value) => {
          settings.vault = value.trim();
          save();
        }),
      );
  }
}
