// Server-sent events read from a stream of text, as kb's /api/ask writes them: `event:` and
// `data:` lines, a blank line ending each event, `:` lines kept for the connection alone.
export interface Event {
  event: string;
  data: string;
}

export class EventReader {
  private buffer = "";

  // The events the text completes; the rest waits for the next piece.
  push(piece: string): Event[] {
    this.buffer += piece.replace(/\r\n?/g, "\n");
    const events: Event[] = [];
    let end = this.buffer.indexOf("\n\n");
    while (end !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const event = parseBlock(block);
      if (event !== null) events.push(event);
      end = this.buffer.indexOf("\n\n");
    }
    return events;
  }
}

function parseBlock(block: string): Event | null {
  let event = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length === 0 ? null : { event, data: data.join("\n") };
}
