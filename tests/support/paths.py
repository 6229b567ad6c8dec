"""Where the project and its example vault are."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_VAULT = ROOT / "examples" / "vault"
