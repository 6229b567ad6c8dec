// What went wrong talking to kb, by what the user can do about it.
export type Trouble =
  | "unreachable" // kb serve is not running at the address: start it
  | "token" // kb serve wants its token (or another one): the settings
  | "refused" // kb answered with an error: its one line says why
  | "busy" // kb is writing as many answers as it writes at once
  | "bad"; // kb answered something the plugin cannot read (another version?)

export class KbError extends Error {
  constructor(
    message: string,
    readonly trouble: Trouble,
  ) {
    super(message);
    this.name = "KbError";
  }
}

// The command that starts kb's server, for the notice when it cannot be reached.
export const START_COMMAND = "kb serve";

export function unreachable(server: string): KbError {
  return new KbError(
    `kb is not running at ${server}: start it with \`${START_COMMAND}\` (or \`kb daemon --serve\`), or set its address in the kb plugin's settings`,
    "unreachable",
  );
}
