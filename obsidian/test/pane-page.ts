// The pane as a page, for the README's screenshot (scripts/screenshots.py): the plugin's own
// parsing and rendering over kb serve's answers, in a browser, since Obsidian cannot run there.
import { parseRelated, parseStatus } from "../src/parse";
import { renderRelated, statusText } from "../src/render";

declare global {
  interface Window {
    kbPane(related: unknown, status: unknown, title: string, count: number): void;
  }
}

window.kbPane = (related, status, title, count) => {
  const pane = document.querySelector<HTMLElement>(".kb-pane");
  const bar = document.querySelector<HTMLElement>(".kb-status");
  if (!pane || !bar) throw new Error("the page has no pane");
  renderRelated(pane, title, parseRelated(related), { count, hideLinked: true }, { open: () => {} });
  bar.textContent = statusText(parseStatus(status));
};
