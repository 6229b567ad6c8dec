// The few parts of Obsidian's API the plugin uses, small enough to run in a test's DOM: the
// `obsidian` package ships type definitions only.

interface ElOptions {
  cls?: string;
  text?: string;
  type?: string;
  value?: string;
  attr?: Record<string, string>;
}

declare global {
  interface HTMLElement {
    empty(): void;
    addClass(cls: string): void;
    removeClass(cls: string): void;
    setText(text: string): void;
    setAttr(name: string, value: string): void;
    createEl<K extends keyof HTMLElementTagNameMap>(tag: K, options?: ElOptions): HTMLElementTagNameMap[K];
    createDiv(options?: ElOptions): HTMLDivElement;
  }
}

const proto = HTMLElement.prototype;
proto.empty = function () {
  this.replaceChildren();
};
proto.addClass = function (cls) {
  this.classList.add(cls);
};
proto.removeClass = function (cls) {
  this.classList.remove(cls);
};
proto.setText = function (text) {
  this.textContent = text;
};
proto.setAttr = function (name, value) {
  this.setAttribute(name, value);
};
proto.createEl = function (tag, options = {}) {
  const el = this.ownerDocument.createElement(tag);
  if (options.cls) el.className = options.cls;
  if (options.text !== undefined) el.textContent = options.text;
  if (options.type) el.setAttribute("type", options.type);
  if (options.value !== undefined) el.setAttribute("value", options.value);
  for (const [k, v] of Object.entries(options.attr ?? {})) el.setAttribute(k, v);
  this.append(el);
  return el;
};
proto.createDiv = function (options) {
  return this.createEl("div", options);
};

export interface RequestUrlParam {
  url: string;
  headers?: Record<string, string>;
  throw?: boolean;
}

// Tests replace it to see what the plugin asks, and when.
export const calls: RequestUrlParam[] = [];
export async function requestUrl(param: RequestUrlParam): Promise<{ status: number; text: string }> {
  calls.push(param);
  throw new Error("net::ERR_CONNECTION_REFUSED");
}

export class Notice {
  static shown: string[] = [];
  constructor(message: string) {
    Notice.shown.push(message);
  }
}

export class TFile {
  constructor(
    public path: string,
    public extension = "md",
  ) {}
}

type Handler = (...args: unknown[]) => void;

class Events {
  handlers = new Map<string, Handler[]>();
  on(name: string, handler: Handler) {
    this.handlers.set(name, [...(this.handlers.get(name) ?? []), handler]);
    return { name, handler };
  }
  trigger(name: string, ...args: unknown[]) {
    for (const handler of this.handlers.get(name) ?? []) handler(...args);
  }
}

export class WorkspaceLeaf {
  view: unknown = null;
  opened: { file: TFile; state: unknown }[] = [];
  async openFile(file: TFile, state?: unknown) {
    this.opened.push({ file, state });
  }
  async setViewState() {}
}

export class Workspace extends Events {
  layoutReady: (() => void)[] = [];
  active: TFile | null = null;
  leaves: WorkspaceLeaf[] = [];
  main = new WorkspaceLeaf();
  onLayoutReady(run: () => void) {
    this.layoutReady.push(run);
  }
  getActiveFile() {
    return this.active;
  }
  getLeavesOfType() {
    return this.leaves;
  }
  getLeaf() {
    return this.main;
  }
  getRightLeaf() {
    return new WorkspaceLeaf();
  }
  async revealLeaf() {}
}

export class Vault extends Events {
  files = new Map<string, TFile>();
  getName() {
    return "vault";
  }
  getAbstractFileByPath(path: string) {
    return this.files.get(path) ?? null;
  }
}

export class App {
  workspace = new Workspace();
  vault = new Vault();
}

export class Component {
  registered: unknown[] = [];
  registerEvent(ref: unknown) {
    this.registered.push(ref);
  }
  registerInterval(id: number) {
    this.registered.push(id);
    return id;
  }
}

export class Plugin extends Component {
  views = new Map<string, (leaf: WorkspaceLeaf) => unknown>();
  commands: { id: string }[] = [];
  statusItems: HTMLElement[] = [];
  data: unknown = null;
  constructor(
    public app: App,
    public manifest: unknown = {},
  ) {
    super();
  }
  registerView(type: string, make: (leaf: WorkspaceLeaf) => unknown) {
    this.views.set(type, make);
  }
  addCommand(command: { id: string }) {
    this.commands.push(command);
  }
  addRibbonIcon() {
    return document.createElement("div");
  }
  addSettingTab() {}
  addStatusBarItem() {
    const item = document.createElement("div");
    this.statusItems.push(item);
    return item;
  }
  async loadData() {
    return this.data;
  }
  async saveData(data: unknown) {
    this.data = data;
  }
}

export class ItemView extends Component {
  containerEl = document.createElement("div");
  contentEl = document.createElement("div");
  constructor(public leaf: WorkspaceLeaf) {
    super();
    this.containerEl.append(this.contentEl);
  }
  getIcon() {
    return "";
  }
  async onOpen() {}
  async onClose() {}
}

export class MarkdownView extends ItemView {}

export class PluginSettingTab {
  containerEl = document.createElement("div");
  constructor(
    public app: App,
    public plugin: Plugin,
  ) {}
}

export class Setting {
  constructor(public containerEl: HTMLElement) {}
  setName() {
    return this;
  }
  setDesc() {
    return this;
  }
  addText() {
    return this;
  }
  addSlider() {
    return this;
  }
  addToggle() {
    return this;
  }
}
