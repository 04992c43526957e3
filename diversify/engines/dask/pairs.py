"""Stage 3c, the bucket scan's candidate pairs verified by their MinHash signatures, where the
documents are: the shuffle join of :mod:`.join` with the sketched input partitions.

- the ``a`` side gathers the pairs whose first document it holds, each distinct pair once (a
  pair found in several bands or bucket partitions is verified once), and sends each pair, with
  ``a``'s signature (once per destination), to the input partition holding ``b``;
- the ``b`` side counts the slots where the two signatures agree and decides as the local build's
  verifier does (:func:`diversify.staging.agreement_band`): at or above the band accepted, below
  it rejected, inside it (``verify="auto"``) borderline, handed to the exact check of
  :mod:`.borderline`. A spanning forest of the accepted pairs leaves it.

A signature thus travels once per (document, input partition of a partner) instead of once per
bucket partition holding one of its band rows: the bucket partitions hold rows and pairs only, and
their memory does not grow with the corpus.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._arrays import unique_sorted
from ...clusters import component_roots
from ...config import BuildConfig
from ...linking.link import make_forest
from ...stages import STAGE_MINHASH
from ...staging import agreement_band
from .borderline import borderline_owners
from .join import by_owner_of_b, pair_join
from .run import Run
from .scan import _forest_out

__all__ = ["verify_pairs", "verified_of", "a_side", "b_side", "agreements"]

def agreements(sigs_a: np.ndarray, rows_a: np.ndarray, sigs_b: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    """Slots where signature ``sigs_a[rows_a[t]]`` agrees with ``sigs_b[rows_b[t]]``, for every t."""
    from ..._kernels.candidates import pair_agreements

    out = np.empty(rows_a.size, dtype=np.int64)
    pair_agreements(np.ascontiguousarray(sigs_a), rows_a.astype(np.int64), np.ascontiguousarray(sigs_b),
                    rows_b.astype(np.int64), out)
    return out


def a_side(skp: dict, offset: int, cfg_json: dict, offsets: np.ndarray, *pieces) -> Any:
    """This partition's pairs (it holds their first documents), each once, split by the owner of the
    second document; each piece carries the signatures of its first documents."""
    pairs = np.concatenate(pieces) if pieces else np.zeros((0, 2), np.int64)
    if pairs.shape[0] > 1:  # each distinct pair once: packed (local first, second), sorted
        n = int(offsets[-1])
        packed = unique_sorted((pairs[:, 0] - np.int64(offset)) * np.int64(n) + pairs[:, 1])
        pairs = np.stack([packed // n + np.int64(offset), packed % n], axis=1)
    sigs = skp["minhash"]
    return by_owner_of_b(pairs, offsets, lambda a: {"docs": a, "sigs": sigs[a - np.int64(offset)]})


def b_side(skp: dict, offset: int, cfg_json: dict, *pieces) -> dict:
    """Verify the pairs received (their second documents are here): a forest of the accepted ones,
    the borderline ones, and the number verified."""
    from ..._kernels.linking import link_pairs_accept

    pieces = tuple(p for p in pieces if p["pairs"].shape[0])
    empty = np.zeros(0, np.int64)
    if not pieces:
        return {"u": empty, "v": empty, "flagged": empty, "deferred": np.zeros((0, 2), np.int64), "verified": 0}
    pairs = np.concatenate([p["pairs"] for p in pieces])
    docs_a = np.concatenate([p["docs"] for p in pieces])  # distinct: each piece is another partition's
    sigs_a = np.concatenate([p["sigs"] for p in pieces])
    order = np.argsort(docs_a, kind="stable")
    rows_a = order[np.searchsorted(docs_a[order], pairs[:, 0])]
    agree = agreements(sigs_a, rows_a, skp["minhash"], pairs[:, 1] - np.int64(offset))
    lo, hi = agreement_band(BuildConfig(**cfg_json), auto=True)
    accepted = pairs[agree >= hi]
    uniq, inv = np.unique(accepted, return_inverse=True)
    forest = make_forest(np.arange(uniq.size, dtype=np.int64), np.zeros(uniq.size, dtype=np.uint8), STAGE_MINHASH)
    link_pairs_accept(inv.reshape(-1, 2).astype(np.int64), forest)
    out = _forest_out(uniq, forest)
    return {**out, "deferred": _not_joined(pairs[(agree >= lo) & (agree < hi)], uniq, forest.parent),
            "verified": int(pairs.shape[0])}


def _not_joined(pairs: np.ndarray, uniq: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Of borderline pairs, those whose two documents the accepted pairs (a forest over ``uniq``) do
    not already connect: a pair inside one component cannot change the components (the local scan
    skips such pairs too), so it is not checked exactly."""
    if pairs.shape[0] == 0 or uniq.size == 0:
        return pairs
    root = component_roots(parent)
    at = np.minimum(np.searchsorted(uniq, pairs), uniq.size - 1)
    known = uniq[at] == pairs
    joined = known[:, 0] & known[:, 1] & (root[at[:, 0]] == root[at[:, 1]])
    return pairs[~joined]


def verified_of(res: dict, offsets: np.ndarray) -> tuple:
    """(pairs verified, forest edges, :func:`.borderline.borderline_owners`) of a ``b`` side."""
    return res["verified"], int(res["u"].size), borderline_owners(res, offsets)


def verify_pairs(run: Run, scanned: list) -> list:
    """Futures of the ``b`` sides (one per input partition) for the pairs of the bucket partitions ``scanned``."""
    tasks = pair_join(run, scanned, "pairs", a_side, b_side, run.sketches, run.cfg_json)
    return run.compute(tasks, "pairs")
