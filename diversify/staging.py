"""The stage layer: what the local engine, the Dask engine and the live index share around the
stages, so that none of them reaches into another's internals.

- inputs: :func:`sketch_inputs` (validate and sketch a corpus as ``build`` does), :func:`check_keys`
  (representative keys) and :func:`doc_thresholds` (each document's Jaccard threshold from its source);
- the linking config: :func:`linking_config` (with source thresholds, the edges at the lowest);
- verification bounds: :func:`agreement_band` and :func:`agreement_bounds` (the borderline band of
  ``verify="auto"``, in signature agreements), read by the linking stages and the cut into clusters;
- outputs: :func:`incremental_extras` (the per-document state an artifact or the live index keeps).

Config coercion (a dict or None to a :class:`~diversify.config.BuildConfig`) is
:func:`diversify.config.resolve_config`.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from ._spill import Spill
from ._tuning import trim_after_sketching
from .config import BuildConfig
from .errors import ConfigError, InputError
from .ids import PackedIds, check_ids, normalize_ids
from .sketches.batch import Sketched, Sketches, sketch_texts, sketch_vectors
from .sketches.source import TextSource
from .stages import FLAG_CHAR_SHINGLES, FLAG_EMPTY_TEXT, FLAG_HAS_VECTOR

__all__ = ["sketch_inputs", "check_keys", "doc_thresholds", "linking_config", "agreement_band", "agreement_bounds",
           "incremental_extras"]


def sketch_inputs(texts, ids, vectors, keys, cfg: BuildConfig, *, progress: bool, chunk_size: int, timings: dict,
            id_offset: int = 0, sets32: bool = False, spill: Optional[Spill] = None) -> Sketched:
    """Validate and sketch a corpus as ``build`` does: texts (text stages), ids (diversify.ids rules),
    vectors (SimHash), keys (representative rule). The live index sketches its batches with it too
    (``sets32``: with the 32-bit shingle sets it stores, from the same pass where it can).

    Returns the sketches and, beside them, the texts at hand for re-shingling (None unless
    ``texts`` is a sequence), which the linking and the cut into clusters take as an argument."""
    source: Optional[TextSource] = None
    t0 = time.perf_counter()
    if texts is not None:
        if cfg.minhash is None and not cfg.exact and cfg.text_simhash is None:
            raise ConfigError(
                "texts were given but every text stage is off (`minhash=None`, `exact=False`, `text_simhash=None`). "
                "Enable one of them, or pass only vectors."
            )
        sk, source = sketch_texts(texts, ids, cfg, id_offset=id_offset, chunk_size=chunk_size, progress=progress, timings=timings,
                          sets32=sets32, spill=spill)
        trim_after_sketching(sk.n)  # the chunks' texts came and went: their heap pages go back
        if cfg.empty == "error" and sk.empty.any():
            bad = np.flatnonzero(sk.empty)
            raise InputError(
                f"documents must contain at least one word under `empty='error'`; {bad.size} do not, e.g. positions "
                f"{bad[:5].tolist()}. Drop them, or use BuildConfig(empty='singleton') to keep them as their own clusters."
            )
    else:
        if ids is None:
            n = len(vectors)
            id_list = list(range(id_offset, id_offset + n))
        else:
            id_list = list(ids)
        n = len(id_list)
        sk = Sketches(ids=id_list, lengths=np.zeros(n, np.uint32), exact=np.zeros(n, np.uint64), empty=np.ones(n, bool),
                      has_text=False)
    t1 = time.perf_counter()
    if isinstance(sk.ids, PackedIds):  # every rule but uniqueness was applied block by block
        sk.ids.check_unique()
    else:
        check_ids(sk.ids)
        sk.ids = normalize_ids(sk.ids)
    timings["ids"] = time.perf_counter() - t1
    if vectors is not None:
        if cfg.simhash is None:
            raise ConfigError("vectors were given but `simhash=None` disables the vector stage. Set simhash=SimHashConfig().")
        sk.simhash, vecs = sketch_vectors(vectors, sk.n, cfg, timings)
        sk.vectors = vecs.astype(np.float32) if cfg.simhash.verify == "estimate" else vecs
    if cfg.representative == "key":
        if keys is None:
            raise ConfigError("`representative='key'` needs `keys` (one number per document; the largest wins).")
        sk.keys = check_keys(keys, sk.n)
    elif keys is not None:
        sk.keys = check_keys(keys, sk.n)
    timings["sketch_total"] = time.perf_counter() - t0
    return Sketched(sk, source)


def check_keys(keys, n: int) -> np.ndarray:
    """Representative keys as float64 (n,) or (n, m): finite numbers, one row per document.

    With m columns, documents are compared on the first column, ties on the second, and so on
    (e.g. authority, then updated_at); ties after the last column go to the longest text.
    """
    try:
        arr = np.asarray(keys, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(
            "`keys` must be numbers (e.g. timestamps or authority scores), one per document, or one row of numbers "
            "per document for several keys in priority order."
        ) from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim not in (1, 2) or arr.shape[0] != n or (arr.ndim == 2 and arr.shape[1] == 0):
        raise InputError(
            f"`keys` must have one number per document (shape ({n},)) or one row per document (shape ({n}, m)); "
            f"got shape {arr.shape}."
        )
    bad = ~np.isfinite(arr) if arr.ndim == 1 else ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise InputError(f"`keys` must be finite; got NaN/inf at positions {np.flatnonzero(bad)[:5].tolist()}.")
    return np.ascontiguousarray(arr)


def doc_thresholds(cfg: BuildConfig, sources, n: int) -> Optional[np.ndarray]:
    """Each document's Jaccard threshold from its source, float64 (n,); None without source thresholds."""
    if sources is None:
        if cfg.source_thresholds is not None:
            raise ConfigError(f"`source_thresholds` needs `sources` (one source name per document; on the command line "
                              f"--source-field FIELD); the config has {cfg.source_thresholds}.")
        return None
    if cfg.source_thresholds is None:
        raise ConfigError("`sources` were given but the config has no `source_thresholds`; set "
                          "BuildConfig(source_thresholds={'name': 0.9, ...}) or drop `sources`.")
    if isinstance(sources, str):
        raise InputError("`sources` must be one source name per document, not one str.")
    given = [s if isinstance(s, str) else None for s in sources]
    if len(given) != n or any(s is None for s in given):
        bad = next((i for i, s in enumerate(given) if s is None), None)
        raise InputError(f"`sources` must hold one str per document ({n}); got {len(given)} items"
                         + (f", item {bad} is not a str" if bad is not None else "") + ".")
    assert cfg.minhash is not None
    default = cfg.minhash.threshold
    table = cfg.source_thresholds
    names = [str(s) for s in given]
    return np.array([table.get(s, default) for s in names], dtype=np.float64)


def linking_config(cfg: BuildConfig) -> BuildConfig:
    """The config the edge stages run with: with source thresholds, MinHash at the lowest of them
    (the cut into clusters then applies each pair's own, stricter, threshold)."""
    if cfg.source_thresholds is None or cfg.minhash is None:
        return cfg
    low = min(cfg.minhash.threshold, *cfg.source_thresholds.values())
    return cfg.model_copy(update={"minhash": cfg.minhash.model_copy(update={"threshold": low}),
                                  "source_thresholds": None})


def agreement_band(cfg: BuildConfig, *, auto: bool) -> tuple[int, int]:
    """Signature agreements (out of num_perm) below which a pair is rejected / at or above which
    it is accepted without an exact check. Equal bounds mean "decide by the estimate alone"."""
    mc = cfg.minhash
    assert mc is not None, "the MinHash stage is off (config.minhash is None)"
    lo, hi = agreement_bounds(np.float64(mc.threshold), mc.num_perm,
                              mc.borderline if mc.verify == "auto" and auto else 0.0)
    return int(lo), int(hi)


def agreement_bounds(threshold, num_perm: int, borderline: float):
    """:func:`agreement_band` for one Jaccard threshold or an array of them (per pair): the
    borderline band is ``threshold +- borderline`` standard errors of the estimate, in agreements;
    ``borderline=0`` gives ``(need, need)``."""
    t = np.asarray(threshold, dtype=np.float64)
    if borderline == 0:
        need = np.ceil(t * num_perm - 1e-9).astype(np.int64)
        return need, need
    se = np.sqrt(t * (1 - t) / num_perm)
    lo = np.maximum(0, np.floor((t - borderline * se) * num_perm)).astype(np.int64)
    hi = np.minimum(num_perm + 1, np.ceil((t + borderline * se) * num_perm)).astype(np.int64)
    return lo, hi


def incremental_extras(sk: Sketches, thresholds: Optional[np.ndarray] = None) -> dict:
    """The per-document state an artifact keeps so that ``add`` (and the live index's export) can
    extend it without a rebuild; ``thresholds``: each document's Jaccard threshold
    (:func:`doc_thresholds`), kept as ``doc_threshold``."""
    ex: dict[str, np.ndarray | None] = {"exact_hash": sk.exact}
    doc_flags = sk.empty.astype(np.uint8) * FLAG_EMPTY_TEXT
    if sk.simhash is not None:
        doc_flags |= FLAG_HAS_VECTOR
    if sk.char_docs is not None:
        doc_flags[sk.char_docs] |= FLAG_CHAR_SHINGLES
    ex["doc_flags"] = doc_flags
    if sk.minhash is not None:
        ex["minhash"] = sk.minhash
    if sk.shingle_indptr is not None:
        ex["shingle_indptr"] = sk.shingle_indptr
        ex["shingle_hashes"] = sk.shingle_hashes
    if sk.simhash is not None:
        ex["simhash"] = sk.simhash
        ex["vectors"] = sk.vectors
    if sk.text_simhash is not None:
        ex["text_simhash"] = sk.text_simhash
    if sk.keys is not None:
        ex["rep_keys"] = sk.keys
    if thresholds is not None:
        ex["doc_threshold"] = thresholds
    return ex
