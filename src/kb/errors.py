"""Errors that reach the user as one line, without a traceback."""

from __future__ import annotations

# The exit status of a command stopped by a KbError, wherever the command ran (a `kb query` a
# daemon answered exits with it in the launcher).
EXIT_ERROR = 1


def first_line(exc: BaseException) -> str:
    """An exception told in one line: the first of its message, else its kind."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class KbError(Exception):
    """An error whose message is fit to print as the whole story."""


class ConfigError(KbError):
    """The configuration is missing, unreadable or names a bad value."""


class DatabaseError(KbError):
    """The database cannot be reached or set up."""


class DiskFull(DatabaseError):
    """The disk under the database is full."""


class LLMError(KbError):
    """An LLM server failed in a way that retrying will not fix soon."""


class LLMUnavailable(LLMError):
    """The LLM server cannot be reached."""


class ModelMissing(LLMError):
    """The LLM server is up but does not have the model."""


class NoteError(KbError):
    """One note cannot be indexed; the run goes on without it."""


class Interrupted(Exception):
    """A run was stopped on purpose (shutdown, lost writer lock) between two files.

    Not a KbError: nothing went wrong. The notes already done are written; whatever was
    half done is not.
    """


class LockLost(Interrupted):
    """A writer lost the writer lock: another writer may own the index now, so it writes
    nothing more, not even the notes it has done."""
