"""MinHash signatures (Jaccard similarity): every way the library makes them.

- :func:`minhash_signatures`: from :class:`~diversify.text.Shingles` (CSR shingle hashes);
- :func:`sketch_oph_buffer`: from an encoded batch of texts (:func:`diversify.text.encode_batch`)
  in one fused pass, without materializing shingles;
- :func:`sketch_oph_sets_buffer`: the same, and each document's 32-bit shingle set in that pass.

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

from ..config import TextConfig
from ..errors import ConfigError, InputError
from ..hashing import SALT_CLASSIC_PERMUTATIONS, minhash_seed, splitmix64_stream
from ..text.shingle import Shingles, auto_split, doc_stats, shingle_room, text_rule, unspaced_docs

__all__ = ["classic_params", "minhash_signatures", "sketch_oph_buffer", "sketch_oph_sets_buffer", "estimate_jaccard",
           "EMPTY"]

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


def sketch_oph_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int,
                      num_perm: int, char_docs: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fused path: bytes -> one-permutation MinHash signatures, without materializing shingles.

    Returns (signatures uint32 (n, num_perm), n_shingles int64, lengths uint32, exact uint64).
    Bit-identical to ``minhash_signatures(diversify.text.shingle_buffer(...), method="oph")``. ``char_docs`` as
    :func:`diversify.text.shingle.auto_split` takes it.
    """
    from .._kernels import text as kt

    rule, char_rule, char = text_rule(config, seed), None, kt.NO_CHAR_DOCS
    if config.shingle == "auto":
        # one call for both kinds of documents, each with its own rule (no batch copied per kind)
        char = unspaced_docs(buf, offsets) if char_docs is None else char_docs
        rule = text_rule(TextConfig(shingle="word", k=config.k), seed)
        char_rule = text_rule(TextConfig(shingle="char", k=config.char_k), seed)
        if char.size and char.all():
            rule, char_rule, char = char_rule, None, kt.NO_CHAR_DOCS
        elif not char.any():
            char = kt.NO_CHAR_DOCS
    n = offsets.size - 1
    stats = doc_stats(n)
    sigs = np.empty((n, num_perm), dtype=np.uint32)
    kt.sketch_oph(buf, offsets, rule, minhash_seed(seed), stats, sigs, char_rule, char)
    return sigs, stats.n_shingles, stats.lengths, stats.exact


def sketch_oph_sets_buffer(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int, num_perm: int,
                           char_docs: np.ndarray | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sketch_oph_buffer` and :func:`~diversify.text.shingle_sets32` of the same batch in one pass over
    its bytes (the live index stores both): (signatures, n_shingles, lengths, exact, sets indptr,
    sets values), each equal to what those two functions return. ``char_docs`` as
    :func:`diversify.text.shingle.auto_split` takes it."""
    from .._kernels import text as kt

    n = offsets.size - 1
    parts = auto_split(buf, offsets, config, char_docs)
    if parts is None or len(parts) == 1:
        b, o, c = (buf, offsets, config) if parts is None else parts[0][1:]
        sigs, n_sh, lengths, exact, starts, counts, hashes = _sketch_oph_sets_one(b, o, c, seed, num_perm)
    else:
        sigs = np.empty((n, num_perm), dtype=np.uint32)
        n_sh, lengths, exact = np.empty(n, np.int64), np.empty(n, np.uint32), np.empty(n, np.uint64)
        starts, counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
        chunks, base = [], 0
        for idx, b, o, c in parts:
            sigs[idx], n_sh[idx], lengths[idx], exact[idx], s_, counts[idx], h_ = _sketch_oph_sets_one(b, o, c, seed,
                                                                                                      num_perm)
            starts[idx] = s_ + base
            chunks.append(h_)
            base += h_.size
        hashes = np.concatenate(chunks)
    indptr = np.empty(n + 1, dtype=np.int64)
    values = np.empty(int(counts.sum()), dtype=np.uint32)
    kt.high_halves(starts, counts, hashes, indptr, values)
    return sigs, n_sh, lengths, exact, indptr, values[: int(indptr[-1])]


def _sketch_oph_sets_one(buf: np.ndarray, offsets: np.ndarray, config: TextConfig, seed: int, num_perm: int):
    from .._kernels import text as kt

    n = offsets.size - 1
    rule = text_rule(config, seed)
    starts = shingle_room(offsets, rule)
    hashes = np.empty(int(starts[-1]), dtype=np.uint64)
    counts = np.empty(n, dtype=np.int64)
    stats = doc_stats(n)
    sigs = np.empty((n, num_perm), dtype=np.uint32)
    kt.sketch_oph_sets(buf, offsets, rule, minhash_seed(seed), stats, sigs, starts, hashes, counts)
    return sigs, stats.n_shingles, stats.lengths, stats.exact, starts[:-1], counts, hashes


def estimate_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity: the fraction of equal signature slots."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"`a` and `b` must be 1-D signatures of equal length; got shapes {a.shape} and {b.shape}.")
    return float(np.count_nonzero(a == b)) / a.size
