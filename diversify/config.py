"""Frozen configuration models and their fingerprint.

Every knob's name says what raising it does, e.g. ``threshold=0.8  # higher -> fewer, tighter
clusters``. Configs are immutable pydantic models; :func:`fingerprint` hashes the canonical JSON
of everything that changes which documents end up together, so an incremental ``add`` can refuse
an artifact built with different settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .hashing import HASH_SCHEME

__all__ = [
    "TextConfig",
    "MinHashConfig",
    "SimHashConfig",
    "TextSimHashConfig",
    "BuildConfig",
    "fingerprint",
    "resolve_config",
    "HASH_SCHEME",
]

#: Name of the hash scheme; recorded in every artifact. Changing any hash is a new scheme.


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(type(self).__name__, exc) from None


def _config_error(model: str, exc: ValidationError) -> ConfigError:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(model)"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"`{loc}`: {msg}; got {err.get('input')!r}")
    return ConfigError(f"Invalid {model}: " + " | ".join(parts))


class TextConfig(_Frozen):
    """How text becomes a set of shingles.

    Normalization is fixed: Unicode NFKC, casefold, whitespace folded. Words are maximal runs of
    characters that are neither whitespace nor ASCII punctuation.
    """

    #: "word" k-shingles, "char" k-grams, or "auto" (default): word shingles, except documents
    #: mostly written in scripts without spaces between words (Chinese, Japanese, Thai, Lao, Khmer,
    #: Myanmar: at least half of their letters), which get character `char_k`-grams
    shingle: Literal["word", "char", "auto"] = "auto"
    #: shingle length in words (or characters); higher -> stricter, only closer copies match
    k: int = 5
    #: character k-gram length of the documents "auto" shingles by character
    char_k: int = 3

    @field_validator("k", "char_k")
    @classmethod
    def _k(cls, v: int) -> int:
        if not 1 <= v <= 32:
            raise ValueError("must be in [1, 32] (use 3-9 for words, 4-12 for characters)")
        return v


class MinHashConfig(_Frozen):
    """MinHash + banded LSH over text shingles (Jaccard similarity)."""

    #: signature length; higher -> more accurate estimates, more memory and time
    num_perm: int = 128
    #: "oph" = one-permutation hashing with optimal densification (fast, default);
    #: "classic" = k independent permutations (compatible Jaccard estimator)
    method: Literal["oph", "classic"] = "oph"
    #: Jaccard similarity at or above which two documents are duplicates; higher -> fewer, tighter clusters
    threshold: float = 0.8
    #: LSH bands / rows per band; None -> chosen from the threshold (S-curve)
    bands: Optional[int] = None
    rows: Optional[int] = None
    #: weights of false positives / false negatives when choosing (bands, rows); candidates are
    #: verified, so a false positive costs only time and the default leans towards recall
    false_positive_weight: float = 0.05
    false_negative_weight: float = 0.95
    #: how candidates are verified: "estimate" by signature agreement; "exact" by exact shingle
    #: Jaccard (keeps every document's shingles in memory); "auto" (default) by the estimate when it
    #: is clearly above or below the threshold and by exact Jaccard for borderline pairs, re-reading
    #: just those documents (needs texts with random access, e.g. a list; else acts as "estimate")
    verify: Literal["estimate", "exact", "auto"] = "auto"
    #: half-width of the borderline band of "auto", in standard errors of the estimate at the
    #: threshold; higher -> more pairs checked exactly
    borderline: float = 2.0

    @field_validator("num_perm")
    @classmethod
    def _num_perm(cls, v: int) -> int:
        if not 8 <= v <= 4096:
            raise ValueError("must be in [8, 4096] (128 is a good default)")
        return v

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, v: float) -> float:
        if not (0.0 < v < 1.0):
            raise ValueError("must be strictly between 0 and 1 (e.g. 0.8)")
        return float(v)

    @field_validator("borderline")
    @classmethod
    def _borderline(cls, v: float) -> float:
        if not (0.0 <= v <= 10.0):
            raise ValueError("must be in [0, 10] standard errors (2 is a good default)")
        return float(v)

    @model_validator(mode="after")
    def _bands_rows(self):
        b, r = self.bands, self.rows
        if (b is None) != (r is None):
            raise ValueError(
                "`bands` and `rows` must be given together or both left unset (chosen automatically); "
                f"got bands={b!r}, rows={r!r}"
            )
        if b is not None and r is not None:
            if b < 1 or r < 1 or b * r > self.num_perm:
                raise ValueError(
                    f"bands*rows must be >= 1 and <= num_perm ({self.num_perm}); got bands={b}, rows={r}. "
                    f"Use e.g. bands={max(1, self.num_perm // max(r, 1))}, rows={r} or leave both unset"
                )
        return self


class SimHashConfig(_Frozen):
    """SimHash (random hyperplanes) + banded LSH over embedding vectors (cosine similarity)."""

    #: bits per family: 64, 128 or 256; higher -> more accurate cosine estimates
    bits: Literal[64, 128, 256] = 256
    #: independent hyperplane families; more -> higher recall, more candidates and time. 2 by
    #: measurement (docs/building.md, "SimHash families")
    families: int = 2
    #: cosine similarity at or above which two vectors are duplicates; higher -> fewer, tighter clusters
    threshold: float = 0.95
    #: bands per family; None -> chosen from the threshold (S-curve); "pigeonhole" guarantees that
    #: every pair within the threshold's Hamming radius shares a band (more candidates)
    bands: Optional[int] = None
    pigeonhole: bool = False
    #: "estimate" verifies by Hamming -> cosine, "exact" by the exact cosine of the vectors (a pair
    #: whose signatures differ far beyond what a pair at the threshold does is rejected unchecked:
    #: docs/building.md, "How the vector stage spends its time")
    verify: Literal["estimate", "exact"] = "exact"

    @field_validator("families")
    @classmethod
    def _families(cls, v: int) -> int:
        if not 1 <= v <= 16:
            raise ValueError("must be in [1, 16]")
        return v

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, v: float) -> float:
        if not (0.0 < v < 1.0):
            raise ValueError("must be strictly between 0 and 1 (e.g. 0.95)")
        return float(v)

    @model_validator(mode="after")
    def _check_bands(self):
        if self.bands is not None and not (1 <= self.bands <= self.bits):
            raise ValueError(f"`bands` must be in [1, bits={self.bits}]; got {self.bands}")
        if self.bands is not None and self.pigeonhole:
            raise ValueError("give either `bands` or `pigeonhole=True`, not both")
        return self


class TextSimHashConfig(_Frozen):
    """Charikar SimHash over word features (64 bits), the classic web-page near-duplicate test.

    Two texts are joined when their fingerprints differ in at most ``max_hamming`` bits. Candidates
    come from ``max_hamming + 1`` pigeonhole bands, so every such pair is found. Coarser than
    MinHash (64 bits of a bag of words, no word order); useful as an extra, cheap stage.
    """

    #: largest Hamming distance of near-duplicates; higher -> looser, more candidates
    max_hamming: int = 3

    @field_validator("max_hamming")
    @classmethod
    def _max_hamming(cls, v: int) -> int:
        if not 0 <= v <= 15:
            raise ValueError("must be in [0, 15] (3 is the usual choice for 64-bit fingerprints)")
        return v


class BuildConfig(_Frozen):
    """Everything that decides which documents end up in one cluster."""

    #: seed of every hash and hyperplane; part of the artifact
    seed: int = 1
    #: group documents whose normalized text is identical before LSH
    exact: bool = True
    text: TextConfig = TextConfig()
    #: MinHash stage over text; None disables it
    minhash: Optional[MinHashConfig] = MinHashConfig()
    #: SimHash stage over vectors; used when vectors are given; None disables it
    simhash: Optional[SimHashConfig] = SimHashConfig()
    #: Charikar SimHash stage over text (off by default)
    text_simhash: Optional[TextSimHashConfig] = None
    #: which member represents a cluster: "longest" text (ties: first seen), "first" seen,
    #: or "key" (largest user-supplied key, e.g. a timestamp or authority score)
    representative: Literal["longest", "first", "key"] = "longest"
    #: what a cluster is: "clique" (default) = every two members are verified threshold-similar,
    #: so a fold is true whichever member a query shows; "star" = every member is verified
    #: threshold-similar to its cluster's representative (two members are then within twice the
    #: threshold's distance of each other); "components" = connected components of verified edges
    #: (transitive: A~B and B~C join A and C, which may be far apart). "guaranteed", the name
    #: "star" had in earlier releases, is read as "star".
    clustering: Literal["clique", "star", "components"] = "clique"
    #: policy for documents with no words: "singleton" (no text stage joins them; a vector stage
    #: still may, through the document's embedding) or "error"
    empty: Literal["singleton", "error"] = "singleton"
    #: candidate pairs verified per giant bucket member: buckets larger than this are compared
    #: within a sliding window of this size instead of all pairs (never O(m^2))
    bucket_window: int = 64
    #: keep signatures in the artifact so that `add` can run without a rebuild
    incremental: bool = True
    #: a Jaccard threshold per source (the `sources` passed to build, e.g. {"titles": 0.9,
    #: "articles": 0.7}); a pair from two sources must meet the stricter one; sources not listed
    #: use `minhash.threshold`. Needs clustering="clique" or "star" (the cut applies it)
    source_thresholds: Optional[dict[str, float]] = None

    @field_validator("seed")
    @classmethod
    def _seed(cls, v: int) -> int:
        if not 0 <= v < 2**63:
            raise ValueError("must be in [0, 2**63)")
        return v

    @field_validator("clustering", mode="before")
    @classmethod
    def _legacy_clustering(cls, v):
        return "star" if v == "guaranteed" else v

    @field_validator("source_thresholds")
    @classmethod
    def _sources(cls, v: Optional[dict]) -> Optional[dict]:
        if v is None:
            return None
        if not v:
            raise ValueError("must name at least one source, or be None")
        for name, t in v.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"source names must be non-empty str; got {name!r}")
            if not (0.0 < float(t) < 1.0):
                raise ValueError(f"thresholds must be strictly between 0 and 1; got {name}={t!r}")
        return {k: float(v[k]) for k in sorted(v)}

    @model_validator(mode="after")
    def _sources_need_guarantee(self):
        if self.source_thresholds is not None:
            if self.clustering == "components":
                raise ValueError("`source_thresholds` needs clustering='clique' or 'star' (components cannot apply "
                                 "a per-pair threshold); got clustering='components'")
            if self.minhash is None:
                raise ValueError("`source_thresholds` are Jaccard thresholds and need the MinHash stage; got minhash=None")
        return self

    @field_validator("bucket_window")
    @classmethod
    def _window(cls, v: int) -> int:
        if not 2 <= v <= 100_000:
            raise ValueError("must be in [2, 100000]")
        return v


def canonical_json(model: BaseModel) -> str:
    """Canonical JSON (sorted keys, no whitespace) of a config."""
    return json.dumps(model.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def fingerprint(config: BuildConfig) -> str:
    """SHA-256 hex of the canonical config plus the hash scheme.

    Two builds with equal fingerprints put the same documents together; ``add`` refuses to mix
    builds whose fingerprints differ. ``incremental`` and ``representative`` do not change which
    documents cluster, but they are included anyway: the fingerprint is about the whole build.
    """
    if not isinstance(config, BuildConfig):
        raise ConfigError(
            f"`config` must be a BuildConfig; got {type(config).__name__}. Wrap a dict as BuildConfig(**d)."
        )
    if config.clustering == "star":  # its earlier name: earlier artifacts keep their fingerprints
        config = config.model_copy(update={"clustering": "guaranteed"})
    payload = HASH_SCHEME + "|" + canonical_json(config)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def resolve_config(config) -> BuildConfig:
    """The :class:`BuildConfig` a caller means: None is the defaults, a dict is its fields."""
    if config is None:
        return BuildConfig()
    if isinstance(config, BuildConfig):
        return config
    if isinstance(config, Mapping):
        return BuildConfig(**config)
    raise ConfigError(f"`config` must be a BuildConfig, a dict of its fields, or None; got {type(config).__name__}.")
