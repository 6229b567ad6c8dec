// kb serve's JSON API, over whatever carries HTTP: Obsidian's requestUrl and fetch in the app,
// Node's fetch in the tests. Every call is a GET; the token goes as a bearer header.
import { KbError, unreachable } from "./errors";
import { parseAnswered, parseRelated, parseSearch, parseStatus, parseVaults } from "./parse";
import { EventReader } from "./sse";
import type { AskEvent, Related, SearchQuery, SearchResult, Status, Vault } from "./types";

export interface Reply {
  status: number;
  text: string;
}

// A plain GET, its whole body as text; it throws when the server cannot be reached.
export type Get = (url: string, headers: Record<string, string>) => Promise<Reply>;

// A GET whose body is read as it comes (the answer's stream): the Fetch API's Response.
export type Stream = (
  url: string,
  headers: Record<string, string>,
  signal?: AbortSignal,
) => Promise<Response>;

export interface Connection {
  server: string;
  token: string;
}

export type Params = Record<string, string | number | boolean | undefined>;

export function address(server: string, path: string, params: Params = {}): string {
  const url = new URL(path, server.endsWith("/") ? server : `${server}/`);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== "") url.searchParams.set(key, String(value));
  }
  return url.toString();
}

export class KbClient {
  constructor(
    private readonly connection: () => Connection,
    private readonly get: Get,
    private readonly stream: Stream,
  ) {}

  status(): Promise<Status> {
    return this.json("api/status", {}, parseStatus);
  }

  vaults(): Promise<Vault[]> {
    return this.json("api/vaults", {}, parseVaults);
  }

  search(query: SearchQuery): Promise<SearchResult> {
    const { topK, ...filters } = query;
    return this.json("api/search", { ...filters, top_k: topK }, parseSearch);
  }

  related(vault: string, path: string, topK: number, unlinked: boolean): Promise<Related> {
    const params = { vault, path, top_k: topK, unlinked: unlinked ? 1 : undefined };
    return this.json("api/related", params, parseRelated);
  }

  // The answer as kb writes it: its pieces of text, then the answer complete or why not.
  async *ask(query: SearchQuery, signal?: AbortSignal): AsyncGenerator<AskEvent> {
    const { server } = this.connection();
    const { topK, ...filters } = query;
    const url = address(server, "api/ask", { ...filters, top_k: topK });
    let response: Response;
    try {
      response = await this.stream(url, this.headers(), signal);
    } catch (error) {
      if (signal?.aborted) return;
      throw unreachable(server);
    }
    if (response.status !== 200 || response.body === null) {
      throw refusal(response.status, await response.text(), "api/ask");
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const events = new EventReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        for (const event of events.push(value)) {
          const data: unknown = JSON.parse(event.data);
          if (event.event === "text" && typeof data === "string") {
            yield { kind: "text", text: data };
          } else if (event.event === "done") {
            yield { kind: "done", answer: parseAnswered(data) };
            return;
          } else if (event.event === "failure") {
            yield { kind: "failure", message: String(data) };
            return;
          }
        }
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (error instanceof KbError) throw error;
      throw new KbError("the connection to kb was lost before the answer was complete", "unreachable");
    } finally {
      reader.releaseLock();
    }
    throw new KbError("the connection to kb was lost before the answer was complete", "unreachable");
  }

  private headers(): Record<string, string> {
    const { token } = this.connection();
    return token ? { Authorization: `Bearer ${token}` } : {};
  }

  private async json<T>(path: string, params: Params, parse: (json: unknown) => T): Promise<T> {
    const { server } = this.connection();
    let reply: Reply;
    try {
      reply = await this.get(address(server, path, params), this.headers());
    } catch {
      throw unreachable(server);
    }
    if (reply.status !== 200) throw refusal(reply.status, reply.text, path);
    let json: unknown;
    try {
      json = JSON.parse(reply.text);
    } catch {
      throw new KbError(`kb answered ${path} with something that is not JSON`, "bad");
    }
    return parse(json);
  }
}

// kb's answer to a call it refused, as one line: its own when it gave one.
export function refusal(status: number, body: string, path: string): KbError {
  let line = body.trim().split("\n")[0] ?? "";
  let json = false;
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
      line = String((parsed as { error: unknown }).error);
      json = true;
    }
  } catch {
    // Plain text (the guard's refusals): the line itself.
  }
  if (status === 401) {
    return new KbError(
      "kb serve wants its token: set it (KB_SERVE_TOKEN) in the kb plugin's settings",
      "token",
    );
  }
  if (status === 404 && !json) {
    // A kb older than the plugin: the page, not the API, says "no such page".
    return new KbError(`this kb serve has no /${path}: update kb`, "bad");
  }
  if (status === 503) return new KbError(line || "kb is busy", "busy");
  return new KbError(line || `kb answered with HTTP ${status}`, "refused");
}
