// How a note is named in a link and dragged into another: as Obsidian writes a wikilink.

// The link's target: the vault-relative path, without `.md` (Obsidian's own form for notes);
// other files keep their extension.
export function linkTarget(path: string): string {
  return path.toLowerCase().endsWith(".md") ? path.slice(0, -3) : path;
}

export function wikiLink(path: string): string {
  return `[[${linkTarget(path)}]]`;
}

// A drag from the pane: the editor inserts text/plain where the note is dropped.
export function setDragLink(transfer: DataTransfer, path: string): void {
  transfer.setData("text/plain", wikiLink(path));
  transfer.effectAllowed = "copyLink";
}
