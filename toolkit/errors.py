"""Exceptions raised by rag-eval. The CLI turns every RagEvalError into one line and exit status 1."""

from __future__ import annotations


class RagEvalError(Exception):
    """Base class of every error rag-eval reports to a user."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class SpecError(RagEvalError, ValueError):
    """A system spec (``NAME[:key=value,...]``) is malformed or names an unknown option."""


class RegistryError(RagEvalError, LookupError):
    """An unknown name, a duplicate registration or a plug-in that failed to load."""


class UnavailableError(RagEvalError):
    """An optional dependency or model that a strategy needs is missing."""


class InvalidTextError(RagEvalError, ValueError):
    """Text that is not valid Unicode (for example a lone surrogate)."""


class ModelError(RagEvalError):
    """Installing, verifying or loading a model failed."""


class CorpusError(RagEvalError, ValueError):
    """A corpus, manifest or source file that cannot be indexed; nothing was written."""


class MissingSourceError(CorpusError, FileNotFoundError):
    """A file the manifest or corpus names does not exist."""


class IndexFileError(RagEvalError):
    """An index file that cannot be opened, is locked, or belongs to another tokenizer."""


class QueryError(RagEvalError, ValueError):
    """A query or search option outside the documented contract (length, terms, limit, date)."""


class ReadError(RagEvalError, PermissionError):
    """A read outside the corpus root, or of an unknown section."""


class DatasetError(RagEvalError, ValueError):
    """A dataset file that cannot be read: its message names the file and line."""


class ServeError(RagEvalError):
    """A server that cannot start: no index, a duplicate index name, a missing --root, a port in use."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt (a subclass, so what stops on Ctrl-C,
    a server, stops on it too), so every ``finally`` and staged output is cleaned up before the process ends.
    The command line installs the handler that raises it."""
