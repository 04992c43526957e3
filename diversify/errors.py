"""Exception tree.

Every error diversify raises is a :class:`DiversifyError`. Each concrete class also
subclasses the matching built-in (``ValueError``, ``TypeError``, ``OSError``...) so that
callers who catch the built-in keep working.

Messages follow one template: the parameter, the rule, what was received, the fix.
"""

from __future__ import annotations

__all__ = [
    "DiversifyError",
    "ConfigError",
    "InputError",
    "InputTypeError",
    "DuplicateIdError",
    "ExistingIdError",
    "ArtifactError",
    "ArtifactNotFoundError",
    "IncompatibleArtifactError",
    "StoreError",
    "MissingDependencyError",
    "WriteConflictError",
    "LockTimeoutError",
    "StorageError",
    "IncompatibleIndexError",
    "VectorStoreError",
    "IndexStorageError",
]


class DiversifyError(Exception):
    """Base class of every error raised by diversify."""


class ConfigError(DiversifyError, ValueError):
    """A configuration value breaks a rule (out of range, inconsistent with another)."""


class InputError(DiversifyError, ValueError):
    """Input data breaks a rule (empty corpus, NaN vector, ragged dimensions...)."""


class InputTypeError(DiversifyError, TypeError):
    """Input data has the wrong type (e.g. a float where an id must be str or int)."""


class DuplicateIdError(InputError):
    """The same document id occurs twice."""


class ExistingIdError(DuplicateIdError):
    """``add`` got a document whose id is already in the artifact. ``position`` is its index among
    the documents given to ``add`` (the record number in the input), ``id`` the id, ``doc`` the
    artifact's document that has it."""

    def __init__(self, message: str, *, position: int, id: object, doc: int):
        super().__init__(message)
        self.position, self.id, self.doc = position, id, doc


class ArtifactError(DiversifyError, ValueError):
    """An artifact file is corrupt, truncated, hostile or of an unsupported version."""


class ArtifactNotFoundError(ArtifactError, FileNotFoundError):
    """The artifact path does not exist or cannot be read."""


class IncompatibleArtifactError(ArtifactError):
    """The artifact was built with a different configuration (fingerprint mismatch)."""


class StoreError(DiversifyError, RuntimeError):
    """A vector store adapter failed or returned something unusable."""


class WriteConflictError(DiversifyError, RuntimeError):
    """A file changed between the read and the write of an update derived from it (compare and swap).

    Writing anyway would silently lose the other writer's update; read the file again and redo it.
    """


class LockTimeoutError(DiversifyError, TimeoutError):
    """Another live process held the writer lock of a path for longer than the timeout."""


class StorageError(DiversifyError, RuntimeError):
    """The storage of a live index failed: unreachable, gone away mid-batch (the batch was rolled
    back), or its writer lock was not acquired in time. The message names the URL, password masked."""


#: the clearer names of the two errors of outside systems, one per layer: a vector store adapter (or
#: the search it wraps) failed -- :class:`StoreError`; the storage of a live index failed --
#: :class:`StorageError`. The same classes: catching either name catches the error.
VectorStoreError = StoreError
IndexStorageError = StorageError


class IncompatibleIndexError(DiversifyError, ValueError):
    """A live index cannot be opened as asked: a newer schema, or a config other than its own."""


class MissingDependencyError(DiversifyError, ImportError):
    """An optional dependency is not installed; the message carries the pip command."""


def require(module: str, *, extra: str, purpose: str):
    """Import an optional dependency lazily, or raise with the install hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised when extras are absent
        raise MissingDependencyError(
            f"{purpose} needs the optional package `{module.split('.')[0]}`, which is not installed. "
            f"Install it with: pip install 'diversify-retrieval[{extra}]'"
        ) from exc


class DiversifyWarning(UserWarning):
    """A build finished but its outcome looks wrong (one giant cluster, most documents folded)."""
