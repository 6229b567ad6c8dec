// What kb serve's JSON API answers, as the plugin reads it (see parse.ts).

export interface Hit {
  vault: string;
  path: string;
  headerPath: string[];
  content: string;
  startLine: number;
  endLine: number;
  score: number;
  date: string | null;
}

export interface SearchResult {
  hits: Hit[];
  modeUsed: string;
  warnings: string[];
}

export interface RelatedNote {
  vault: string;
  path: string;
  title: string;
  score: number;
  why: string[];
}

export interface LinkedNote {
  vault: string;
  path: string;
  title: string;
  line: number | null;
}

export interface Unresolved {
  target: string;
  line: number | null;
}

export interface Related {
  related: RelatedNote[];
  linksTo: LinkedNote[];
  linkedFrom: LinkedNote[];
  unresolved: Unresolved[];
}

export interface Queue {
  items: number;
  etaSeconds: number | null;
}

export interface Status {
  documents: number;
  vectors: Queue;
  context: Queue;
}

export interface Vault {
  name: string;
  folder: string;
}

export interface Source {
  vault: string;
  path: string;
  headerPath: string[];
  startLine: number;
  endLine: number;
}

export interface Answered {
  text: string;
  notInNotes: boolean;
  sources: Source[];
}

// The answer's stream: pieces of text as the model writes them, then the answer complete, or
// one line saying why there is none.
export type AskEvent =
  | { kind: "text"; text: string }
  | { kind: "done"; answer: Answered }
  | { kind: "failure"; message: string };

// The search filters of kb's page (docs/search.md#filters), by their query-string names.
export interface SearchQuery {
  q: string;
  path?: string;
  tags?: string;
  after?: string;
  before?: string;
  mode?: "hybrid" | "text" | "vector";
  topK?: number;
}
