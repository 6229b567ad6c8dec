// kb's JSON read into the plugin's types: a field of the wrong kind is a KbError naming it,
// never an `undefined` rendered later.
import { KbError } from "./errors";
import type {
  Answered,
  Hit,
  LinkedNote,
  Queue,
  Related,
  RelatedNote,
  SearchResult,
  Source,
  Status,
  Unresolved,
  Vault,
} from "./types";

type Json = Record<string, unknown>;

function object(value: unknown, what: string): Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new KbError(`kb answered something that is not ${what}`, "bad");
  }
  return value as Json;
}

function list(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new KbError(`kb's ${what} is not a list`, "bad");
  return value;
}

function text(json: Json, key: string): string {
  const value = json[key];
  if (typeof value !== "string") throw new KbError(`kb's ${key} is not text`, "bad");
  return value;
}

function number(json: Json, key: string): number {
  const value = json[key];
  if (typeof value !== "number") throw new KbError(`kb's ${key} is not a number`, "bad");
  return value;
}

function maybeNumber(json: Json, key: string): number | null {
  const value = json[key];
  return typeof value === "number" ? value : null;
}

function texts(value: unknown): string[] {
  if (typeof value === "string") return [value];
  return list(value, "list of text").filter((v): v is string => typeof v === "string");
}

export function parseHit(value: unknown): Hit {
  const json = object(value, "a search hit");
  return {
    vault: text(json, "vault"),
    path: text(json, "path"),
    headerPath: texts(json["header_path"]),
    content: text(json, "content"),
    startLine: number(json, "start_line"),
    endLine: number(json, "end_line"),
    score: number(json, "score"),
    date: typeof json["date"] === "string" ? json["date"] : null,
  };
}

export function parseSearch(value: unknown): SearchResult {
  const json = object(value, "a search's result");
  return {
    hits: list(json["hits"], "hits").map(parseHit),
    modeUsed: typeof json["mode_used"] === "string" ? json["mode_used"] : "hybrid",
    warnings: texts(json["warnings"]),
  };
}

function relatedNote(value: unknown): RelatedNote {
  const json = object(value, "a related note");
  return {
    vault: text(json, "vault"),
    path: text(json, "path"),
    title: text(json, "title"),
    score: number(json, "score"),
    why: texts(json["why"]),
  };
}

function linkedNote(value: unknown): LinkedNote | null {
  const json = object(value, "a link");
  // A link to no note (unresolved) has no path: it is listed with the unresolved ones.
  if (typeof json["path"] !== "string") return null;
  const path = json["path"];
  return {
    vault: typeof json["vault"] === "string" ? json["vault"] : "",
    path,
    title: typeof json["title"] === "string" ? json["title"] : path,
    line: maybeNumber(json, "line"),
  };
}

function unresolved(value: unknown): Unresolved {
  if (typeof value === "string") return { target: value, line: null };
  const json = object(value, "an unresolved link");
  const target = json["target"] ?? json["title"];
  return { target: typeof target === "string" ? target : "", line: maybeNumber(json, "line") };
}

export function parseRelated(value: unknown): Related {
  const json = object(value, "a note's related notes");
  const notes = (key: string) =>
    list(json[key], key)
      .map(linkedNote)
      .filter((n): n is LinkedNote => n !== null);
  return {
    related: list(json["related"], "related").map(relatedNote),
    linksTo: notes("links_to"),
    linkedFrom: notes("linked_from"),
    unresolved: list(json["unresolved"], "unresolved").map(unresolved),
  };
}

function queue(value: unknown): Queue {
  const json = object(value ?? {}, "a queue");
  return { items: maybeNumber(json, "items") ?? 0, etaSeconds: maybeNumber(json, "eta_seconds") };
}

export function parseStatus(value: unknown): Status {
  const json = object(value, "kb's status");
  return {
    documents: number(json, "documents"),
    vectors: queue(json["vectors"]),
    context: queue(json["enrichment"]),
  };
}

export function parseVaults(value: unknown): Vault[] {
  const json = object(value, "kb's vaults");
  return list(json["vaults"], "vaults").map((v) => {
    const vault = object(v, "a vault");
    return { name: text(vault, "name"), folder: text(vault, "folder") };
  });
}

function source(value: unknown): Source {
  const json = object(value, "a source");
  return {
    vault: text(json, "vault"),
    path: text(json, "path"),
    headerPath: texts(json["header_path"]),
    startLine: number(json, "start_line"),
    endLine: number(json, "end_line"),
  };
}

export function parseAnswered(value: unknown): Answered {
  const json = object(value, "an answer");
  return {
    text: typeof json["text"] === "string" ? json["text"] : "",
    notInNotes: json["not_in_notes"] === true,
    sources: list(json["sources"], "sources").map(source),
  };
}
