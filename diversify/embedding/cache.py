"""The vector cache beside a build's output: a rebuild embeds only texts it has not embedded.

One ``.npz`` file holds the model's key (library and model digest), one digest per text and the
vectors. It is replaced atomically (written to a temporary file, then renamed), and any file that
cannot be read, or was made by another model, is a miss: the texts are embedded again and the
cache rewritten. Rows are matched by the digest of their text, so an edited or grown corpus reuses
the vectors of the texts it kept.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from typing import Optional, Union

import numpy as np

from ..files import atomic_replace

__all__ = ["text_digests", "read_cache", "write_cache"]

_DIGEST = 16  # bytes of blake2b per text


def text_digests(texts: list) -> np.ndarray:
    """One 16-byte digest per text (``S16``)."""
    out = np.empty(len(texts), dtype=f"S{_DIGEST}")
    for i, t in enumerate(texts):
        out[i] = hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=_DIGEST).digest()
    return out


def read_cache(path: Union[str, os.PathLike], key: str, dim: int) -> dict:
    """{text digest: vector row} from the cache at ``path``; empty when it is absent, unreadable,
    truncated or made by another model."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return {}
            digests, vectors = z["digests"], z["vectors"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return {}
    if (vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[1] != dim
            or digests.shape != (vectors.shape[0],) or not np.isfinite(vectors).all()):
        return {}
    return {bytes(d): vectors[i] for i, d in enumerate(digests)}


def write_cache(path: Union[str, os.PathLike], key: str, digests: np.ndarray, vectors: np.ndarray,
                param: Optional[str] = None) -> None:
    """Replace the cache at ``path`` atomically with these rows."""
    _, first = np.unique(digests, return_index=True)  # one row per distinct text
    with atomic_replace(path, what="the vector cache", param=param or "cache") as f:
        np.savez(f, key=np.array(key), digests=digests[first], vectors=np.ascontiguousarray(vectors[first]))
