"""The live index: a persistent near-duplicate index that many processes add to, query and delete from.

``diversify.Index(url)`` keeps the batch builder's text rule, sketches, verification and fold
guarantee over a storage URL (``sqlite:///path.db``, ``postgresql://...``, ``redis://...``); see
docs/index.md. The storage interface the backends implement is :mod:`diversify.index.storage`.

Importing this package is light (no numba, no database client): backends and kernels load on use.
"""

from __future__ import annotations

import importlib

__all__ = ["Index", "open_storage"]

_LAZY = {"Index": "diversify.index.core", "open_storage": "diversify.index.storage"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'diversify.index' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
