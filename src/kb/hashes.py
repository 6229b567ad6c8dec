"""The two hashes that make repeated work free: a text's or a file's content hash, and the
cache key of a model output (a hash of exactly the parts it was made from)."""

from __future__ import annotations

import hashlib


def content_hash(data: str | bytes) -> str:
    """The SHA-256 of a note's bytes or a text's UTF-8, in hex: what rows are compared by."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def cache_key(*parts: str) -> str:
    """A hash of exactly these parts, in order: the key every cached model output is kept under."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x1f")
    return digest.hexdigest()
