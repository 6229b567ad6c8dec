// The plugin's settings, and what they default to.
export interface KbSettings {
  server: string; // where `kb serve` listens
  token: string; // KB_SERVE_TOKEN, when kb serve was started with one
  relatedCount: number;
  hideLinked: boolean; // related notes this note links to or from are left out
  vault: string; // kb's name for this vault; empty: the one whose folder is this vault's
}

export const DEFAULT_SETTINGS: KbSettings = {
  server: "http://127.0.0.1:8766",
  token: "",
  relatedCount: 10,
  hideLinked: true,
  vault: "",
};

export function readSettings(saved: unknown): KbSettings {
  const given = typeof saved === "object" && saved !== null ? (saved as Partial<KbSettings>) : {};
  return { ...DEFAULT_SETTINGS, ...given };
}

// The kb vault this Obsidian vault is: named in the settings, else the one kb keeps from a
// folder of this name, else kb's only vault.
export function pickVault(
  vaults: { name: string; folder: string }[],
  folder: string,
  named: string,
): string | null {
  if (named) return named;
  const same = vaults.find((v) => v.folder === folder);
  if (same) return same.name;
  return vaults.length === 1 && vaults[0] ? vaults[0].name : null;
}
