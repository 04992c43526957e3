"""The live index: a persistent near-duplicate index that many processes add to, query and delete from.

``diversify.Index(url)`` keeps the batch builder's text rule, sketches, verification and fold
guarantee over a storage URL (``sqlite:///path.db``, ``postgresql://...``, ``redis://...``); see
docs/index.md. The storage interface the backends implement is :mod:`diversify.index.storage`.

Importing this package is light (no numba, no database client): backends and kernels load on use.
"""

from __future__ import annotations

__all__ = ["Index", "open_storage"]


def __getattr__(name: str):
    if name == "Index":
        from .core import Index

        return Index
    if name == "open_storage":
        from .registry import open_storage

        return open_storage
    raise AttributeError(f"module 'diversify.index' has no attribute {name!r}")
