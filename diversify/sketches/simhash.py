"""SimHash (cosine similarity): every way the library makes the signatures.

- :func:`simhash_vectors`: random-hyperplane signatures of vectors, ``bits`` per family;
- :func:`text_simhash` / :func:`text_simhash_buffer`: Charikar's 64-bit fingerprint of a text
  over its words (the ``text_simhash`` stage), from texts or from an encoded batch.

Hyperplanes come from the seed through a fixed generator (splitmix64 stream -> uniform doubles
-> Box-Muller normals), so they are the same on every machine and numpy version. Vectors are
L2-normalized first. The estimated cosine of two signatures with Hamming distance h over ``bits``
bits is ``cos(pi * h / bits)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError, InputError
from ..hashing import SALT_HYPERPLANES, splitmix64_stream

__all__ = [
    "hyperplanes",
    "normalize_vector",
    "normalize_vectors",
    "simhash_vectors",
    "text_simhash",
    "text_simhash_buffer",
    "hamming_distance",
    "hamming_distance_hex",
    "cosine_from_hamming",
]

def hyperplanes(seed: int, dim: int, bits: int, families: int = 1) -> np.ndarray:
    """Deterministic Gaussian hyperplanes, float64 (families * bits, dim); a new array each call."""
    return _planes(int(seed), int(dim), int(bits), int(families)).copy()


@functools.lru_cache(maxsize=2)
def _planes(seed: int, dim: int, bits: int, families: int) -> np.ndarray:
    """:func:`hyperplanes`, computed once per (seed, dim, bits, families) for the signing below: a
    live-index query of one vector would otherwise make them again, costing more than the
    signing itself. Never written to."""
    n = families * bits * dim
    half = (n + 1) // 2
    raw = splitmix64_stream(seed ^ SALT_HYPERPLANES, 2 * half)
    # 53-bit uniforms in (0, 1]
    u = ((raw >> np.uint64(11)).astype(np.float64) + 1.0) * (1.0 / 9007199254740992.0)
    u1, u2 = u[:half], u[half:]
    # the C library's log, one by one: numpy's AVX-512 log differs from it in the last bit, and the
    # hyperplanes (so every vector signature) must not depend on the CPU
    r = np.sqrt(-2.0 * np.array([math.log(v) for v in u1.tolist()], dtype=np.float64))
    z = np.concatenate([r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2)])[:n]
    return z.reshape(families * bits, dim)


def normalize_vectors(vectors, *, name: str = "vectors") -> np.ndarray:
    """Validate and L2-normalize a 2-D array; float64 copy. NaN/inf/zero rows are errors.

    Only real numbers are vectors: a complex array (whose cast to float would drop the imaginary
    part), strings, dates and structured records are refused, not converted.
    """
    kind = getattr(getattr(vectors, "dtype", None), "kind", None)
    if kind is not None and kind not in "biufO":
        what = {"c": "complex numbers", "U": "strings", "S": "bytes", "M": "dates", "m": "time deltas",
                "V": "structured records"}.get(kind, f"dtype {vectors.dtype}")
        fix = ("Embeddings are real: pass the real vectors (np.real(v) only if the imaginary part is known to be "
               "zero)." if kind == "c" else "Pass a float array (n, dim).")
        raise InputError(f"`{name}` must hold real numbers; got {what} (dtype {vectors.dtype}). {fix}")
    try:
        arr = (vectors if isinstance(vectors, np.ndarray) and kind is not None and kind in "fiub"
               else np.asarray(vectors, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"`{name}` must be a 2-D array of numbers (n, dim); could not convert it: {exc}. "
            "Pass a numpy array, or a list of equal-length lists of floats."
        ) from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise InputError(f"`{name}` must be 2-D (n, dim) with dim >= 1; got shape {arr.shape}. Reshape to (n, dim).")
    out, norms, finite = _unit_rows(arr)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise InputError(
            f"`{name}` must be finite; rows {bad[:5].tolist()}{'...' if bad.size > 5 else ''} contain NaN or inf "
            f"({bad.size} rows). Drop or re-embed those documents."
        )
    zero = norms == 0
    if zero.any():
        bad = np.flatnonzero(zero)
        raise InputError(
            f"`{name}` rows must have nonzero length (cosine is undefined for a zero vector); rows "
            f"{bad[:5].tolist()}{'...' if bad.size > 5 else ''} are all zeros ({bad.size} rows). Drop or re-embed them."
        )
    return out


_NORMALIZE_BLOCK = 16384  # rows converted and divided at a time: no full-size temporaries


def _unit_rows(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 rows of ``arr`` divided by their lengths (rows that are not finite, or zero, left
    as they are), the lengths, and which rows are finite; block by block, the same numbers as
    ``a / sqrt(einsum(a, a))`` on the whole float64 array."""
    n, d = arr.shape
    out = np.empty((n, d), dtype=np.float64)
    norms = np.empty(n, dtype=np.float64)
    finite = np.empty(n, dtype=bool)
    for lo in range(0, n, _NORMALIZE_BLOCK):
        hi = min(n, lo + _NORMALIZE_BLOCK)
        block = out[lo:hi]
        block[...] = arr[lo:hi]
        np.isfinite(block).all(axis=1, out=finite[lo:hi])
        np.sqrt(np.einsum("ij,ij->i", block, block), out=norms[lo:hi])
        ok = finite[lo:hi] & (norms[lo:hi] != 0)
        if ok.all():
            np.divide(block, norms[lo:hi, None], out=block)
        else:
            block[ok] = block[ok] / norms[lo:hi][ok, None]
    return out, norms, finite


def normalize_vector(vector, *, name: str = "vector") -> np.ndarray:
    """One vector L2-normalized: float64 1-D copy of unit length.

    ``vector`` is 1-D (dim,) or one row (1, dim) of real, finite numbers, not all zero; anything
    else (a matrix, an empty vector, NaN or inf, strings, complex numbers) raises
    :class:`~diversify.errors.InputError` naming ``name``.
    """
    shape = np.shape(vector)
    if len(shape) == 2 and shape[0] == 1:
        vector = np.asarray(vector)[0]
        shape = shape[1:]
    if len(shape) != 1 or shape[0] == 0:
        raise InputError(f"`{name}` must be one vector, 1-D (dim,) with dim >= 1; got shape {shape}. Pass one "
                         "embedding (e.g. matrix[i]), not a matrix or a scalar.")
    kind = getattr(getattr(vector, "dtype", None), "kind", None)
    if kind is None or kind == "O":
        try:
            vector = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"`{name}` must hold numbers; got {list(vector)[:3]!r}... Pass a float array.") from None
    arr = np.asarray(vector)
    if arr.dtype.kind in "biuf" and not np.isfinite(arr.astype(np.float64)).all():
        bad = np.flatnonzero(~np.isfinite(arr.astype(np.float64)))
        raise InputError(f"`{name}` must be finite; positions {bad[:5].tolist()}{'...' if bad.size > 5 else ''} hold "
                         f"NaN or inf ({bad.size} of {arr.size}). Re-embed the document.")
    return normalize_vectors(arr.reshape(1, -1), name=name)[0]


def simhash_vectors(vectors, *, seed: int = 1, bits: int = 256, families: int = 1, normalized: bool = False) -> np.ndarray:
    """Packed SimHash signatures, uint64 (n, families * bits // 64)."""
    from .._kernels.simhash import fill_simhash

    if bits not in (64, 128, 256):
        raise ConfigError(f"`bits` must be 64, 128 or 256; got {bits!r}. Use 256 for the most accurate estimates.")
    if not 1 <= int(families) <= 16:
        raise ConfigError(f"`families` must be in [1, 16]; got {families!r}.")
    vecs = np.ascontiguousarray(vectors if normalized else normalize_vectors(vectors), dtype=np.float64)
    planes = _planes(int(seed), int(vecs.shape[1]), int(bits), int(families))
    out = np.empty((vecs.shape[0], families * bits // 64), dtype=np.uint64)
    if vecs.shape[0] < PRODUCT_MIN_ROWS or not _fits_float32(vecs):  # a query's vector or a few: the direct loop
        fill_simhash(vecs, planes, out)
    else:
        sign_by_products(vecs, planes, out)
    return out


#: from this many vectors on, signatures come from float32 matrix products (:func:`sign_by_products`)
PRODUCT_MIN_ROWS = 64
#: rows per matrix product: fixed, so memory stays bounded (the bits do not depend on it)
PRODUCT_BLOCK = 8192
_F32_EPS = 2.0**-24  # unit roundoff of float32


def _fits_float32(vecs: np.ndarray) -> bool:
    """Whether float32 products of these rows can neither overflow nor lose them to underflow
    (unit rows always can; ``normalized=True`` promises unit rows but is not checked)."""
    return not vecs.size or (float(vecs.max()) < 1e15 and float(vecs.min()) > -1e15)  # no |vecs| temporary


def _project(rows32: np.ndarray, planes32_t: np.ndarray) -> np.ndarray:
    """float32 (rows, nbits): one BLAS product (its summation order is the library's own)."""
    return rows32 @ planes32_t


def product_margin(vecs: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """Per row, a bound twice over the error of a float32 product of these rows with these planes.

    Whatever the summation order (any BLAS, any thread count, with or without FMA), a float32 dot
    product of length d whose inputs were rounded to float32 is within
    ``(d + 2) u / (1 - (d + 2) u) * sum |x_t| |p_t|`` of the exact one (u = 2**-24), and
    ``sum |x_t| |p_t| <= |x| |p|``. With twice that margin, a product outside it has the sign of
    the exact dot product, and so of the float64 one :func:`fill_simhash` sums (whose error is
    about 2**-29 times smaller); the ones inside are recomputed by that float64 sum. The absolute
    term covers float32 underflow of tiny coordinates.
    """
    d = planes.shape[1]
    g = (d + 2) * _F32_EPS
    gamma = g / (1.0 - 2.0 * g) if 2.0 * g < 1.0 else np.inf
    row_norms = np.sqrt(np.einsum("ij,ij->i", vecs, vecs))
    plane_norm = float(np.sqrt(np.einsum("ij,ij->i", planes, planes)).max())
    return 2.0 * gamma * row_norms * plane_norm + 2.0 * d * 2.0**-126 * (1.0 + plane_norm)


def sign_by_products(vecs: np.ndarray, planes: np.ndarray, out: np.ndarray, *, block: int = PRODUCT_BLOCK) -> None:
    """``out`` = the packed sign bits of ``planes @ vecs[i]``, bit for bit what :func:`fill_simhash`
    gives, from one float32 matrix product per block of ``block`` rows: a product within
    :func:`product_margin` of zero is recomputed in float64 in a fixed order, so the bits depend
    neither on the BLAS, its threads, nor the block size."""
    from .._kernels.simhash import fill_simhash_signs

    planes32_t = np.ascontiguousarray(planes.T, dtype=np.float32)
    for lo in range(0, vecs.shape[0], block):
        rows = vecs[lo:lo + block]
        products = _project(rows.astype(np.float32), planes32_t)
        fill_simhash_signs(products, product_margin(rows, planes), rows, planes, out[lo:lo + block])


def text_simhash(texts: Sequence[str]) -> np.ndarray:
    """64-bit Charikar SimHash of each document over its words (weight = occurrence count).

    Returns uint64 (n,). Near-identical texts differ in few bits; estimate cosine similarity of
    the word-count vectors with ``cos(pi * hamming / 64)`` (rough: 64 bits is a small sample).
    """
    from ..text.encode import encode_batch
    from ..text.shingle import check_texts

    texts = check_texts(texts)
    buf, offsets = encode_batch(texts)
    return text_simhash_buffer(buf, offsets)


def text_simhash_buffer(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """:func:`text_simhash` of an already encoded batch (see :func:`diversify.text.encode_batch`):
    uint64 (n,). Words are the text rule's (:mod:`diversify.text.tables`)."""
    from .._kernels import text as kt
    from ..text.tables import CLASSES, LOWER

    out = np.empty(offsets.size - 1, dtype=np.uint64)
    kt.fill_unit_simhash(buf, offsets, LOWER, CLASSES, out)
    return out


def hamming_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Hamming distance of two packed uint64 signatures."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
    return int(sum(int(w).bit_count() for w in x.ravel()))


def hamming_distance_hex(a: str, b: str) -> int:
    """Hamming distance of two signatures given as hex strings of equal length (as
    :func:`diversify.simhash_bands` writes them)."""
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, str) or not v:
            raise InputError(f"`{name}` must be a non-empty hex string (a SimHashFamily.signature); got "
                             f"{type(v).__name__} {v!r:.40}.")
    if len(a) != len(b):
        raise InputError(
            f"`a` and `b` must be hex signatures of equal length; got lengths {len(a)} and {len(b)}. "
            "Compare signatures made with the same `bits`."
        )
    try:
        if not all(c in _HEX for c in a + b):
            raise ValueError
        return (int(a, 16) ^ int(b, 16)).bit_count()
    except ValueError:
        raise InputError(f"`a` and `b` must be hexadecimal strings (0-9, a-f); got {a[:20]!r}, {b[:20]!r}.") from None


_HEX = frozenset("0123456789abcdefABCDEF")


def cosine_from_hamming(h: int, bits: int) -> float:
    """Estimated cosine similarity ``cos(pi * h / bits)`` of two SimHash signatures of ``bits``
    bits that differ in ``h`` bits (``h`` and ``bits`` whole numbers, ``0 <= h <= bits``)."""
    for name, v in (("h", h), ("bits", bits)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise InputError(f"`{name}` must be a whole number of bits (int); got {type(v).__name__} {v!r}. "
                             "Pass hamming_distance_hex(...) and the signature's bits.")
    if bits <= 0 or not 0 <= h <= bits:
        raise InputError(f"`h` must be in [0, bits] and `bits` > 0; got h={h!r}, bits={bits!r}.")
    return math.cos(math.pi * int(h) / int(bits))


def row_hex(words: np.ndarray) -> str:
    # most significant word first, so that int(hex, 16) holds bit j of word w at position 64*w + j
    return "".join(f"{int(w):016x}" for w in words[::-1])
