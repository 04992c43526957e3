"""MinHash signatures over shingle hashes (Jaccard similarity).

Two methods, both giving uint32 signatures (n_docs, num_perm) whose agreement rate estimates
the Jaccard similarity of the shingle sets:

- ``"oph"``: one-permutation hashing with optimal densification (Shrivastava, ICML 2017). Each
  shingle is hashed once and lands in one of ``num_perm`` bins; empty bins borrow from a filled bin
  along a fixed probe sequence. O(shingles + num_perm) per document: the default.
- ``"classic"``: ``num_perm`` universal hashes ``(a*x + b) mod (2**61 - 1)``, truncated to 32 bits,
  computed exactly in uint64. O(shingles * num_perm) per document.

Estimates are approximate: the standard error of the estimate is about sqrt(J(1-J)/num_perm);
raise ``num_perm`` to tighten it, or verify candidates exactly (``MinHashConfig(verify="exact")``).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError, InputError
from ..hashing import SALT_CLASSIC_PERMUTATIONS, minhash_seed, splitmix64_stream
from ..text import Shingles

__all__ = ["classic_params", "minhash_signatures", "estimate_jaccard", "EMPTY"]

MERSENNE61 = (1 << 61) - 1
#: value of every slot of a document that has no shingles
EMPTY = 0xFFFFFFFF


def classic_params(seed: int, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """Permutation parameters (a, b) of classic MinHash: 1 <= a < p, 0 <= b < p, p = 2**61 - 1."""
    stream = splitmix64_stream(seed ^ SALT_CLASSIC_PERMUTATIONS, 2 * num_perm).tolist()
    a = [(stream[2 * j] % (MERSENNE61 - 1)) + 1 for j in range(num_perm)]
    b = [stream[2 * j + 1] % MERSENNE61 for j in range(num_perm)]
    return np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64)


def minhash_signatures(shingles: Shingles, *, num_perm: int = 128, method: str = "oph", seed: int = 1) -> np.ndarray:
    """MinHash signatures, uint32 (n_docs, num_perm). Documents without shingles get all ``EMPTY``."""
    from .._kernels import minhash as km

    if not 8 <= int(num_perm) <= 4096:
        raise ConfigError(f"`num_perm` must be in [8, 4096]; got {num_perm!r}. 128 is a good default.")
    out = np.empty((len(shingles), int(num_perm)), dtype=np.uint32)
    if method == "oph":
        km.fill_minhash_oph(shingles.hashes, shingles.indptr, minhash_seed(seed), out)
    elif method == "classic":
        a, b = classic_params(seed, int(num_perm))
        km.fill_minhash_classic(shingles.hashes, shingles.indptr, a, b, out)
    else:
        raise ConfigError(f"`method` must be 'oph' or 'classic'; got {method!r}.")
    return out


def estimate_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity: the fraction of equal signature slots."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"`a` and `b` must be 1-D signatures of equal length; got shapes {a.shape} and {b.shape}.")
    return float(np.count_nonzero(a == b)) / a.size
