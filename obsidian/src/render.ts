// What the plugin's views show, as DOM built from kb's answers: text is only ever set as text.
// The views (main.ts) hand in what a click or a drag does, so this runs in a test's DOM.
import { KbError } from "./errors";
import { setDragLink } from "./links";
import type { Answered, Hit, LinkedNote, Related, SearchResult, Source, Status } from "./types";

export interface Actions {
  // Open a note of this vault, at a line (1-based) when one is given.
  open(path: string, line?: number): void;
}

type Tag = keyof HTMLElementTagNameMap;

function el<K extends Tag>(
  parent: HTMLElement,
  tag: K,
  cls?: string,
  text?: string,
): HTMLElementTagNameMap[K] {
  const child = parent.ownerDocument.createElement(tag);
  if (cls) child.className = cls;
  if (text !== undefined) child.textContent = text;
  parent.append(child);
  return child;
}

// A note's title as a link that opens it and drags as a [[link]].
function noteLink(parent: HTMLElement, actions: Actions, path: string, title: string, line?: number) {
  const link = el(parent, "a", "kb-note", title);
  link.href = "#";
  link.draggable = true;
  link.title = path;
  link.dataset["path"] = path;
  link.addEventListener("click", (event) => {
    event.preventDefault();
    actions.open(path, line);
  });
  link.addEventListener("dragstart", (event) => {
    if (event.dataTransfer) setDragLink(event.dataTransfer, path);
  });
  return link;
}

function section(parent: HTMLElement, title: string, count: number): HTMLElement {
  const part = el(parent, "section", "kb-section");
  const head = el(part, "h4", "kb-section-title", title);
  el(head, "span", "kb-count", String(count));
  return part;
}

export interface RelatedOptions {
  count: number;
  hideLinked: boolean;
}

// The notes it links to or from are left out of "related" when hidden: they are one click away.
export function shownRelated(related: Related, options: RelatedOptions) {
  const linked = new Set([...related.linksTo, ...related.linkedFrom].map((n) => n.path));
  return related.related
    .filter((note) => !options.hideLinked || !linked.has(note.path))
    .slice(0, options.count);
}

export function renderRelated(
  root: HTMLElement,
  title: string,
  related: Related,
  options: RelatedOptions,
  actions: Actions,
): void {
  root.replaceChildren();
  el(root, "div", "kb-pane-note", title);
  const notes = shownRelated(related, options);
  const part = section(root, options.hideLinked ? "Related, not linked" : "Related", notes.length);
  if (notes.length === 0) el(part, "p", "kb-empty", "No related notes found.");
  const list = el(part, "ul", "kb-list");
  for (const note of notes) {
    const item = el(list, "li", "kb-item");
    const head = el(item, "div", "kb-item-head");
    noteLink(head, actions, note.path, note.title);
    // The ranker's score: it orders this note's candidates, on no scale beyond them.
    el(head, "span", "kb-score", note.score.toFixed(2)).title = "kb's score, compared among this note's related notes";
    el(item, "div", "kb-path", note.path);
    if (note.why.length > 0) el(item, "div", "kb-why", note.why.join(" · "));
  }
  linkedSection(root, "Linked from", related.linkedFrom, actions);
  if (related.unresolved.length > 0) {
    const missing = section(root, "Unresolved links", related.unresolved.length);
    const items = el(missing, "ul", "kb-list");
    for (const link of related.unresolved) {
      const item = el(items, "li", "kb-item kb-unresolved", `[[${link.target}]]`);
      if (link.line !== null) el(item, "span", "kb-line", `line ${link.line}`);
    }
  }
}

function linkedSection(root: HTMLElement, title: string, notes: LinkedNote[], actions: Actions) {
  const part = section(root, title, notes.length);
  if (notes.length === 0) {
    el(part, "p", "kb-empty", "No note links here.");
    return;
  }
  const list = el(part, "ul", "kb-list");
  for (const note of notes) {
    const item = el(list, "li", "kb-item");
    // The line of the link in the other note: the click opens it there.
    noteLink(item, actions, note.path, note.title, note.line ?? undefined);
    el(item, "div", "kb-path", note.path);
  }
}

function hitCard(list: HTMLElement, hit: Hit, actions: Actions): void {
  const item = el(list, "li", "kb-item kb-hit");
  const head = el(item, "div", "kb-item-head");
  const title = hit.headerPath.length > 0 ? hit.headerPath[hit.headerPath.length - 1] : undefined;
  noteLink(head, actions, hit.path, (title ?? hit.path).replace(/^#+\s*/, ""), hit.startLine);
  if (hit.date) el(head, "span", "kb-date", hit.date);
  el(item, "div", "kb-path", `${hit.path}:${hit.startLine}-${hit.endLine}`);
  el(item, "div", "kb-snippet", snippet(hit.content));
}

// A passage shortened for the pane: its first lines, whole words.
export function snippet(content: string, limit = 280): string {
  const flat = content.replace(/\s+/g, " ").trim();
  if (flat.length <= limit) return flat;
  const cut = flat.slice(0, limit);
  const space = cut.lastIndexOf(" ");
  return `${cut.slice(0, space > limit / 2 ? space : limit)}…`;
}

export function renderHits(root: HTMLElement, result: SearchResult, actions: Actions): void {
  root.replaceChildren();
  for (const warning of result.warnings) el(root, "p", "kb-warning", warning);
  if (result.hits.length === 0) {
    el(root, "p", "kb-empty", "Nothing found.");
    return;
  }
  const list = el(root, "ul", "kb-list");
  for (const hit of result.hits) hitCard(list, hit, actions);
}

// A citation as the model writes it: [2] or [1, 3].
const CITATION = /\[\s*\d+(?:\s*,\s*\d+)*\s*\]/g;

export function appendAnswerText(root: HTMLElement, text: string): void {
  root.append(root.ownerDocument.createTextNode(text));
}

export function renderAnswer(root: HTMLElement, answer: Answered, actions: Actions): void {
  root.replaceChildren();
  if (answer.notInNotes) el(root, "p", "kb-verdict", "Not in your notes");
  const body = el(root, "p", "kb-answer-text");
  let position = 0;
  for (const match of answer.text.matchAll(CITATION)) {
    appendAnswerText(body, answer.text.slice(position, match.index));
    for (const n of match[0].match(/\d+/g) ?? []) {
      const source = answer.sources[Number(n) - 1];
      if (source === undefined) appendAnswerText(body, `[${n}]`);
      else citation(body, Number(n), source, actions);
    }
    position = (match.index ?? 0) + match[0].length;
  }
  appendAnswerText(body, answer.text.slice(position));
  if (answer.sources.length === 0) return;
  const part = section(root, "Sources", answer.sources.length);
  const list = el(part, "ol", "kb-list kb-sources");
  for (const source of answer.sources) {
    const item = el(list, "li", "kb-item");
    const title = source.headerPath.join(" › ") || source.path;
    noteLink(item, actions, source.path, title, source.startLine);
    el(item, "div", "kb-path", `${source.path}:${source.startLine}-${source.endLine}`);
  }
}

function citation(parent: HTMLElement, n: number, source: Source, actions: Actions): void {
  const link = noteLink(parent, actions, source.path, `[${n}]`, source.startLine);
  link.className = "kb-citation";
  link.title = `${source.path}:${source.startLine}-${source.endLine}`;
}

export function renderTrouble(root: HTMLElement, error: unknown): void {
  root.replaceChildren();
  const message = error instanceof KbError ? error.message : `kb: ${String(error)}`;
  const line = el(root, "p", "kb-trouble", message);
  line.setAttribute("role", "alert");
  if (error instanceof KbError) line.dataset["trouble"] = error.trouble;
}

// "3 min", "2 h 5 min": the ETA kb computes, for a glance.
export function duration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "?";
  if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
}

export function statusText(status: Status): string {
  const parts = [`kb: ${status.documents} searchable`];
  const queued = (n: number, what: string, eta: number | null) =>
    n > 0 ? `${n} ${what} queued (ETA ${duration(eta)})` : null;
  const vectors = queued(status.vectors.items, "vectors", status.vectors.etaSeconds);
  const context = queued(status.context.items, "context", status.context.etaSeconds);
  if (vectors) parts.push(vectors);
  if (context) parts.push(context);
  if (!vectors && !context) parts.push("all vectors and context done");
  return parts.join(" · ");
}
