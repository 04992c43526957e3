"""Choosing LSH banding parameters.

A pair with similarity s becomes a candidate with probability ``P(s) = 1 - (1 - s**r)**b`` for
``b`` bands of ``r`` rows (the S-curve), where s is the per-row collision probability: the Jaccard
similarity for MinHash, ``1 - angle/pi`` for SimHash bits. We choose (b, r) with ``b * r <= n``
minimizing ``w_fp * FP + w_fn * FN``, where FP is the area under P below the threshold and FN the
area above it under 1 - P. LSH only proposes candidates; every candidate is verified, so false
positives cost time, not precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np

from ..errors import ConfigError

__all__ = ["LSHParams", "candidate_probability", "optimal_params", "pigeonhole_params", "simhash_bit_similarity",
           "band_starts", "SimHashFamily", "simhash_bands", "simhash_lsh_multi", "SimHashBandTable"]


@dataclass(frozen=True)
class LSHParams:
    """Chosen banding and what to expect from it."""

    bands: int
    rows: int
    #: probability that a pair exactly at the threshold becomes a candidate
    recall_at_threshold: float
    #: probability that a pair at 0.5 x the threshold becomes a candidate (a rough candidate load)
    fp_at_half_threshold: float
    false_positive_area: float
    false_negative_area: float
    method: str

    def as_dict(self) -> dict:
        return {k: (float(v) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def _power(x: np.ndarray, e: int) -> np.ndarray:
    """``x ** e`` for a float64 array and an int ``e``, the same values on every CPU.

    numpy's ``power`` has an AVX-512 loop whose results differ in the last bit from the C library's
    ``pow``, which numpy calls on other CPUs: the LSH figures stored in an artifact (and so its
    bytes) changed with the machine. This keeps numpy's own shortcuts (``e`` 0, 1 and 2: ones, a
    copy, ``x * x``) and takes every other power from the C library (``math.pow``), one by one.
    """
    if e == 0:
        return np.ones_like(x)
    if e == 1:
        return x.copy()
    if e == 2:
        return np.square(x)
    return np.array([math.pow(v, e) for v in x.ravel().tolist()], dtype=np.float64).reshape(x.shape)


def candidate_probability(s, bands: int, rows: int):
    """P(candidate) for per-row collision probability ``s`` (scalar or array)."""
    s = np.asarray(s, dtype=np.float64)
    return 1.0 - _power(1.0 - _power(s, int(rows)), int(bands))


def _areas(t: float, b: int, r: int, lo: float = 0.0, hi: float = 1.0) -> tuple[float, float]:
    xs = np.linspace(lo, t, 257)
    fp = float(np.trapezoid(candidate_probability(xs, b, r), xs))
    xs = np.linspace(t, hi, 257)
    fn = float(np.trapezoid(1.0 - candidate_probability(xs, b, r), xs))
    return fp, fn


@lru_cache(maxsize=256)
def optimal_params(threshold: float, n: int, fp_weight: float = 0.5, fn_weight: float = 0.5,
                   *, lo: float = 0.0, hi: float = 1.0, method: str = "s-curve") -> LSHParams:
    """(bands, rows) with bands * rows <= n minimizing the weighted error areas."""
    best: Optional[tuple[float, int, int, float, float]] = None
    for b in range(1, n + 1):
        for r in range(1, n // b + 1):
            fp, fn = _areas(threshold, b, r, lo, hi)
            err = fp_weight * fp + fn_weight * fn
            if best is None or err < best[0] - 1e-15:
                best = (err, b, r, fp, fn)
    assert best is not None, "n >= 1 gives at least the candidate (1, 1)"
    _, b, r, fp, fn = best
    return _params(threshold, b, r, fp, fn, method)


def _params(t: float, b: int, r: int, fp: float, fn: float, method: str) -> LSHParams:
    return LSHParams(
        bands=b,
        rows=r,
        recall_at_threshold=float(candidate_probability(t, b, r)),
        fp_at_half_threshold=float(candidate_probability(t / 2, b, r)),
        false_positive_area=fp,
        false_negative_area=fn,
        method=method,
    )


def fixed_params(threshold: float, bands: int, rows: int) -> LSHParams:
    fp, fn = _areas(threshold, bands, rows)
    return _params(threshold, bands, rows, fp, fn, "user")


def simhash_bit_similarity(cosine: float) -> float:
    """Per-bit collision probability of random-hyperplane SimHash at a cosine similarity."""
    c = min(1.0, max(-1.0, float(cosine)))
    return 1.0 - math.acos(c) / math.pi


def hamming_radius(cosine: float, bits: int) -> int:
    """Largest Hamming distance whose estimated cosine cos(pi*h/bits) is still >= ``cosine``."""
    h = int(math.floor(bits * math.acos(min(1.0, max(-1.0, cosine))) / math.pi + 1e-9))
    return max(0, min(bits, h))


#: chance, for a pair at the threshold, that its signatures differ in more bits than
#: :func:`hamming_cutoff` allows (over the draw of the hyperplanes)
HAMMING_CUTOFF_TAIL = 1e-12


def hamming_cutoff(cosine: float, bits: int, tail: float = HAMMING_CUTOFF_TAIL) -> int:
    """Hamming distance beyond which a pair is below ``cosine`` but for a chance of at most ``tail``.

    Each of ``bits`` independent hyperplanes separates two vectors at cosine c with probability
    acos(c)/pi, so their Hamming distance is Binomial(bits, acos(c)/pi), and larger c only moves it
    down. The cutoff is the smallest h with P(distance > h) <= ``tail`` at c = ``cosine``: the exact
    check of vectors skips pairs beyond it (unrelated vectors sit far beyond it).
    """
    q = math.acos(min(1.0, max(-1.0, float(cosine)))) / math.pi
    if q <= 0.0:
        return 0
    if q >= 1.0:
        return bits
    lq, lp, top = math.log(q), math.log1p(-q), math.lgamma(bits + 1)
    above = 0.0  # P(distance > k), summed from the top
    for k in range(bits, -1, -1):
        above += math.exp(top - math.lgamma(k + 1) - math.lgamma(bits - k + 1) + k * lq + (bits - k) * lp)
        if above > tail:
            return k
    return 0


def pigeonhole_params(cosine: float, bits: int) -> LSHParams:
    """Bands such that every pair within the threshold's Hamming radius shares a band.

    With b bands, two signatures that differ in at most b-1 bits agree exactly on at least one
    band (pigeonhole), so recall of pairs whose *estimated* cosine passes is 1.
    """
    radius = hamming_radius(cosine, bits)
    b = min(bits, radius + 1)
    r = bits // b
    fp, fn = _areas(simhash_bit_similarity(cosine), b, r)
    p = _params(simhash_bit_similarity(cosine), b, r, fp, fn, "pigeonhole")
    return LSHParams(b, r, 1.0, p.fp_at_half_threshold, fp, 0.0, "pigeonhole")


def band_starts(bits: int, bands: int) -> np.ndarray:
    """Split ``bits`` into ``bands`` contiguous ranges as equal as possible (first ones longer)."""
    base, extra = divmod(bits, bands)
    widths = np.full(bands, base, dtype=np.int64)
    widths[:extra] += 1
    out = np.zeros(bands + 1, dtype=np.int64)
    np.cumsum(widths, out=out[1:])
    return out


# --------------------------------------------------------------------------- band keys of one vector
# The public per-vector SimHash API (importable from ``diversify``; docs/simhash-api.md): one
# vector's signatures and band keys, a table that looks vectors up by their band keys, and the
# Hamming -> cosine estimate (diversify.sketches.simhash). A build uses the same hyperplanes (same
# seed, bits and families give the same signatures) but hashes its band keys into integers.


@dataclass(frozen=True)
class SimHashFamily:
    """One family of a vector's SimHash: its signature and its LSH band keys.

    ``signature`` is ``bits`` bits as hex (most significant first; :func:`hamming_distance_hex`
    compares two). ``bands`` holds one key per band, ``"<band>:<hex of the band's bits>"``: two
    vectors whose keys agree on any band of a family are LSH candidates.
    """

    family: int
    bits: int
    signature: str
    bands: tuple[str, ...]


def _check_band_args(bits: int, bands: int, families: int, seed: int) -> None:
    for name, v in (("bits", bits), ("bands", bands), ("families", families), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ConfigError(f"`{name}` must be an int; got {type(v).__name__} {v!r}.")
    if bits not in (64, 128, 256):
        raise ConfigError(f"`bits` must be 64, 128 or 256; got {bits!r}. Use 256 for the most accurate estimates.")
    if not 1 <= bands <= bits:
        raise ConfigError(f"`bands` must be in [1, bits={bits}]; got {bands!r}. 16 bands of 16 bits suit bits=256.")
    if not 1 <= families <= 16:
        raise ConfigError(f"`families` must be in [1, 16]; got {families!r}.")
    if not 0 <= seed < 2**64:
        raise ConfigError(f"`seed` must be in [0, 2**64); got {seed!r}.")


def simhash_bands(vector, *, bits: int = 256, bands: int = 16, families: int = 1, seed: int = 1) -> list[SimHashFamily]:
    """SimHash of one vector in ``families`` independent hyperplane families, with band keys.

    ``vector``: one embedding, 1-D (dim,) of finite numbers, not all zero (L2-normalized here).
    Each family's ``bits`` are cut into ``bands`` contiguous ranges; two vectors whose signatures
    agree on any band are LSH candidates. With ``bands`` = b, every pair within Hamming distance
    b-1 in a family shares a band (pigeonhole). Same ``seed``, ``bits`` and ``families`` give the
    same signatures on every machine. Raises InputError for a vector that is not one finite,
    nonzero vector, ConfigError for parameters out of range.
    """
    from ..sketches.simhash import normalize_vector, row_hex, simhash_vectors

    _check_band_args(bits, bands, families, seed)
    unit = normalize_vector(vector)
    sig = simhash_vectors(unit[None, :], seed=int(seed), bits=bits, families=families, normalized=True)[0]
    starts = band_starts(bits, bands)
    out = []
    for f in range(families):
        words = sig[f * bits // 64 : (f + 1) * bits // 64]
        value = int(row_hex(words), 16)
        keys = []
        for b in range(bands):
            width = int(starts[b + 1] - starts[b])
            part = (value >> int(starts[b])) & ((1 << width) - 1)
            keys.append(f"{b}:{part:0{(width + 3) // 4}x}")
        out.append(SimHashFamily(family=f, bits=bits, signature=row_hex(words), bands=tuple(keys)))
    return out


#: the name of :func:`simhash_bands` before it was public; kept working
simhash_lsh_multi = simhash_bands


class SimHashBandTable:
    """Vectors looked up by their SimHash band keys: the LSH table of :func:`simhash_bands`.

    ``add(key, vector)`` files a vector under each of its band keys; ``candidates(vector)`` are
    the keys that share at least one band key with it in some family; ``query(vector,
    min_cosine=...)`` ranks them by the cosine their signatures estimate
    (:func:`cosine_from_hamming` of the Hamming distance over every family's bits). Every vector
    must have the dimension of the first one. Held in memory (a dict per family); for a corpus,
    ``diversify.build(vectors=...)`` does the same at scale.
    """

    def __init__(self, *, bits: int = 256, bands: int = 16, families: int = 1, seed: int = 1):
        _check_band_args(bits, bands, families, seed)
        self.bits, self.bands, self.families, self.seed = int(bits), int(bands), int(families), int(seed)
        self.dim: Optional[int] = None
        self._tables: list[dict[str, list]] = [{} for _ in range(self.families)]
        self._signatures: dict = {}

    def __len__(self) -> int:
        return len(self._signatures)

    def __contains__(self, key) -> bool:
        return key in self._signatures

    def signatures(self, vector) -> list[SimHashFamily]:
        """:func:`simhash_bands` of ``vector`` with this table's settings (its dimension checked)."""
        from ..errors import InputError

        shape = np.shape(vector)
        dim = shape[-1] if len(shape) in (1, 2) else None
        if self.dim is not None and dim != self.dim:
            raise InputError(f"`vector` must have the table's dimension {self.dim} (that of its first vector); got "
                             f"shape {shape}. Use one embedding model for every vector of a table.")
        return simhash_bands(vector, bits=self.bits, bands=self.bands, families=self.families, seed=self.seed)

    def add(self, key, vector) -> list[SimHashFamily]:
        """File ``vector`` under ``key`` (hashable, not already in the table); returns its signatures."""
        from ..errors import InputError

        try:
            known = key in self._signatures
        except TypeError:
            raise InputError(f"`key` must be hashable (a str or an int id); got {type(key).__name__}.") from None
        if known:
            raise InputError(f"`key` {key!r} is already in the table; give each vector its own key.")
        fams = self.signatures(vector)
        if self.dim is None:
            self.dim = int(np.shape(vector)[-1])
        for fam in fams:
            table = self._tables[fam.family]
            for band_key in fam.bands:
                table.setdefault(band_key, []).append(key)
        self._signatures[key] = tuple(f.signature for f in fams)
        return fams

    def candidates(self, vector) -> list:
        """Keys sharing at least one band key with ``vector`` in some family, in the order they were added."""
        if not self._signatures:
            return []
        return self._candidates(self.signatures(vector))

    def _candidates(self, fams: list[SimHashFamily]) -> list:
        found: set = set()
        for fam in fams:
            table = self._tables[fam.family]
            for band_key in fam.bands:
                found.update(table.get(band_key, ()))
        return [k for k in self._signatures if k in found]

    def query(self, vector, *, min_cosine: float = -1.0) -> list[tuple]:
        """``(key, estimated cosine)`` of the candidates whose estimate is ``>= min_cosine``, highest first."""
        from ..errors import InputError
        from ..sketches.simhash import cosine_from_hamming, hamming_distance_hex

        if isinstance(min_cosine, bool) or not isinstance(min_cosine, (int, float)) or not -1.0 <= min_cosine <= 1.0:
            raise InputError(f"`min_cosine` must be a number in [-1, 1]; got {min_cosine!r}.")
        if not self._signatures:
            return []
        fams = self.signatures(vector)
        mine = [f.signature for f in fams]
        out = []
        for key in self._candidates(fams):
            h = sum(hamming_distance_hex(a, b) for a, b in zip(mine, self._signatures[key]))
            cos = cosine_from_hamming(h, self.bits * self.families)
            if cos >= min_cosine:
                out.append((key, cos))
        out.sort(key=lambda kc: -kc[1])
        return out
