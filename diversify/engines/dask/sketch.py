"""Stage 1, sketching: each input partition is sketched on its worker by the local build's own code.

The per-document columns stay on the workers (as futures); the client only learns their sizes,
which give every document its global index (its position in the input order).
"""

from __future__ import annotations

import time

import numpy as np

from ...config import BuildConfig
from ...errors import InputError
from .inputs import Part

__all__ = ["sketch_part", "n_of", "empty_of", "columns_of"]


def sketch_part(part: Part, cfg_json: dict, keep_texts: bool = False) -> dict:
    """Per-document columns of one input partition (:func:`diversify.sketches.batch.sketch_texts`);
    with ``keep_texts``, its texts too, for the stages that read them (:mod:`.texts`)."""
    from ...sketches.batch import sketch_texts

    cfg = BuildConfig(**cfg_json)
    t0 = time.perf_counter()
    sk = sketch_texts(part.texts, None, cfg, timings={}).sketches
    n = sk.n
    if part.ids is not None and len(part.ids) != n:
        raise InputError(f"`ids` must have one id per text; a partition has {n} texts and {len(part.ids)} ids.")
    if part.keys is not None and len(part.keys) != n:
        raise InputError(f"`keys` must have one number per text; a partition has {n} texts and {len(part.keys)} keys.")
    out = {
        "n": n,
        "ids": part.ids,
        "keys": part.keys,
        "lengths": sk.lengths,
        "exact": sk.exact,
        "empty": sk.empty,
        "minhash": sk.minhash,
        "seconds": time.perf_counter() - t0,
    }
    if keep_texts:
        out["texts"] = part.texts
    return out


def n_of(skp: dict) -> int:
    return int(skp["n"])


def empty_of(skp: dict) -> np.ndarray:
    return np.flatnonzero(skp["empty"])


def columns_of(skp: dict, with_minhash: bool) -> dict:
    """What the artifact needs of a sketched partition (signatures only for incremental builds)."""
    out = {k: skp[k] for k in ("n", "ids", "keys", "lengths", "exact", "empty", "seconds")}
    if with_minhash:
        out["minhash"] = skp["minhash"]
    return out
