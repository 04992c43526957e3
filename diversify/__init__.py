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
    # configuration (every default lives here)
    "BuildConfig": "diversify.config",
    "TextConfig": "diversify.config",
    "MinHashConfig": "diversify.config",
    "SimHashConfig": "diversify.config",
    "TextSimHashConfig": "diversify.config",
    "fingerprint": "diversify.config",
    # offline: build, add, what a build returns
    "build": "diversify.engines.local",
    "add": "diversify.engines.local",
    # build from the documents a vector store holds (docs/recipes/from-a-store.md)
    "build_from": "diversify.stores.building",
    # chunked corpora: paragraph-aligned chunks, and chunks built with their pages (docs/recipes/chunked-rag.md)
    "chunk_paragraphs": "diversify.corpus.chunking",
    "Chunk": "diversify.corpus.chunking",
    "build_chunks": "diversify.engines.chunked",
    "BuildResult": "diversify.engines.finish",
    "BuildStats": "diversify.engines.finish",
    # the optional embedding step (the [embed] extra): texts -> normalized vectors, docs/embedding.md
    "embed": "diversify.embedding",
    # the artifact
    "ClusterMap": "diversify.artifact",
    "load": "diversify.artifact",
    # online
    "select": "diversify.online",
    "Diversifier": "diversify.online",
    "Hit": "diversify.online",
    "Kept": "diversify.online",
    "Group": "diversify.online",
    "Result": "diversify.online",
    "DocId": "diversify.online",
    "SearchFn": "diversify.online",
    "AsyncSearchFn": "diversify.online",
    "ClusterLookup": "diversify.online",
    "DiversifiedSearch": "diversify.online",
    "AsyncDiversifiedSearch": "diversify.online",
    # every error a user can catch
    "DiversifyError": "diversify.errors",
    "ConfigError": "diversify.errors",
    "InputError": "diversify.errors",
    "InputTypeError": "diversify.errors",
    "DuplicateIdError": "diversify.errors",
    "ArtifactError": "diversify.errors",
    "ArtifactNotFoundError": "diversify.errors",
    "IncompatibleArtifactError": "diversify.errors",
    "StoreError": "diversify.errors",
    "MissingDependencyError": "diversify.errors",
    "WriteConflictError": "diversify.errors",
    "LockTimeoutError": "diversify.errors",
    "StorageError": "diversify.errors",
    "IncompatibleIndexError": "diversify.errors",
    "VectorStoreError": "diversify.errors",  # = StoreError, its clearer name
    "IndexStorageError": "diversify.errors",  # = StorageError, its clearer name
    # the live index
    "Index": "diversify.index",
    # one vector's SimHash: signatures, band keys, the band table, Hamming -> cosine (docs/simhash-api.md)
    "simhash_bands": "diversify.linking.bands",
    "simhash_lsh_multi": "diversify.linking.bands",
    "SimHashFamily": "diversify.linking.bands",
    "SimHashBandTable": "diversify.linking.bands",
    "normalize_vector": "diversify.sketches.simhash",
    "hamming_distance_hex": "diversify.sketches.simhash",
    "cosine_from_hamming": "diversify.sketches.simhash",
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
