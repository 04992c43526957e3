"""diversify: keep near-duplicate documents out of retrieval results.

Offline, :func:`build` clusters a corpus (exact hash, MinHash over text, SimHash over vectors,
banded LSH, verification, union-find) and writes a :class:`ClusterMap` artifact. Online,
:func:`select` and :class:`Diversifier` keep at most ``n`` hits per cluster in a store's top-k.

``import diversify`` is light: numba and vendor SDKs load only when the offline builder or a
store adapter is first used.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> module that defines it; resolved on first access (PEP 562) to keep import light.
_LAZY = {
    "BuildConfig": "diversify.config",
    "TextConfig": "diversify.config",
    "MinHashConfig": "diversify.config",
    "SimHashConfig": "diversify.config",
    "fingerprint": "diversify.config",
    "build": "diversify.engines.local",
    "add": "diversify.engines.local",
    "BuildResult": "diversify.engines.local",
    "ClusterMap": "diversify.artifact",
    "load": "diversify.artifact",
    "select": "diversify.online",
    "Diversifier": "diversify.online",
    "Hit": "diversify.online",
    "DiversifyError": "diversify.errors",
    "ConfigError": "diversify.errors",
    "InputError": "diversify.errors",
    "ArtifactError": "diversify.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'diversify' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
