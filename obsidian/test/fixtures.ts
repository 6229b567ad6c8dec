// kb serve's answers as it writes them (src/kb/web/routes.py, kb related --json).
export const RELATED = {
  vault: "example",
  path: "Projects/Home Server.md",
  title: "Home Server",
  related: [
    { vault: "example", path: "Reference/Postgres Cheatsheet.md", title: "Postgres Cheatsheet", score: 0.8123, why: ["links here", "shared tags: homelab"] },
    { vault: "example", path: "Alex/Work Log.md", title: "Work Log", score: 0.5, why: ["mentions its title: 'Home Server'"] },
    { vault: "example", path: "People/Kenji Sato.md", title: "Kenji Sato", score: 0.31, why: "the same writer" },
  ],
  links_to: [{ vault: "example", path: "Reference/Postgres Cheatsheet.md", title: "Postgres Cheatsheet", line: 12 }],
  linked_from: [{ vault: "example", path: "Alex/Goals 2024.md", title: "Goals 2024", line: 7 }],
  unresolved: [{ target: "Backups <script>", line: 20 }],
  ranker: "related-v1",
};

export const SEARCH = {
  hits: [
    {
      vault: "example",
      path: "Alex/Journal/2024-04-12.md",
      header_path: ["# Friday, 12 April 2024 — Mount Takao", "## The climb"],
      content: "We climbed Mount Takao by trail 6.\n\nThe <b>view</b> was clear.",
      score: 0.91,
      similarity: 0.5,
      start_line: 15,
      end_line: 23,
      date: "2024-04-12",
    },
  ],
  mode_used: "hybrid",
  warnings: ["full-text search only (the query could not be embedded): refused"],
};

export const STATUS = {
  documents: 1520,
  chunks: 9000,
  vectors: { items: 40, eta_seconds: 75 },
  enrichment: { items: 300, eta_seconds: 7500 },
};

export const DONE = {
  html: "<p>ignored</p>",
  not_in_notes: false,
  cited: [1, 2],
  text: "You climbed Mount Takao [1, 2] in April [3].",
  sources: [
    { vault: "example", path: "Alex/Journal/2024-04-12.md", header_path: ["# Friday"], start_line: 7, end_line: 9 },
    { vault: "example", path: "Alex/Journal/2024-04-12.md", header_path: ["# Friday", "## The climb"], start_line: 15, end_line: 23 },
  ],
};
