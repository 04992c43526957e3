"""What the fold check asks of two documents: is ``r`` verified similar to each candidate, by the
stage that joins them (exact hash, MinHash estimate or exact Jaccard, text SimHash, vector cosine),
and how similar; what the check cost (:class:`FoldStats`); the representative order.

The cut (:mod:`diversify.clusters.guarantee`) and the live index's assignment and check use the
same :class:`Similarity`, so a fold means the same thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..config import BuildConfig
from ..sketches.batch import Sketches
from ..sketches.source import TextSource
from ..stages import STAGE_EXACT, STAGE_MINHASH, STAGE_SIMHASH, STAGE_TEXT_SIMHASH
from ..staging import agreement_band, agreement_bounds
from ..text import exact_jaccard

__all__ = ["FoldStats", "Similarity", "priority_rank"]

_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


@dataclass
class FoldStats:
    """What cutting the components cost and changed (recorded in the artifact's build info)."""

    components_cut: int = 0  # components of 2+ documents that became more than one cluster
    pairs_checked: int = 0  # member-representative similarity checks
    exact_checks: int = 0  # member-representative pairs decided by exact Jaccard
    by_stage: dict = field(default_factory=dict)  # stage -> folds it verified
    pairs_certified: int = 0  # member pairs the metric bound certified without a check (clique)
    #: float64 (n,): verified similarity of each folded document to its representative (exact where
    #: checked exactly, else the estimate); NaN for representatives and unchanged old documents
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def as_dict(self) -> dict:
        out = {"components_cut": self.components_cut, "pairs_checked": self.pairs_checked,
               "exact_checks": self.exact_checks, "by_stage": dict(sorted(self.by_stage.items()))}
        if self.pairs_certified:
            out["pairs_certified"] = self.pairs_certified
        return out


def priority_rank(rule: str, lengths: np.ndarray, keys: Optional[np.ndarray]) -> np.ndarray:
    """rank[i] = position of document i in representative order (0 = first choice), int64 (n,).

    ``longest``: longest normalized text first; ``first``: position; ``key``: the key columns in
    order, largest first, then the longest text. Ties always go to the lower position.
    """
    n = lengths.size
    idx = np.arange(n)
    if rule == "first":
        order = idx
    elif rule == "longest":
        order = np.lexsort((idx, -lengths.astype(np.int64)))
    else:
        if keys is None:
            raise ValueError("representative='key' needs keys")
        cols = keys.reshape(n, -1)
        order = np.lexsort((idx, -lengths.astype(np.int64), *[-cols[:, j] for j in range(cols.shape[1] - 1, -1, -1)]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = idx
    return rank


class Similarity:
    """Vectorized "is document r verified similar to each of these documents", per enabled stage."""

    def __init__(self, sk: Sketches, cfg: BuildConfig, stats: FoldStats, thresholds: Optional[np.ndarray] = None,
                 source: Optional[TextSource] = None):
        self.sk, self.cfg, self.stats = sk, cfg, stats
        #: float64 (n,) each document's Jaccard threshold (source_thresholds), else None
        self.thresholds = thresholds
        #: the texts at hand, re-shingled for exact checks (diversify.sketches.source), else None
        self.source = source
        self.band = (0, 0)
        if cfg.minhash is not None and sk.minhash is not None:
            self.band = agreement_band(cfg, auto=True)
        self.text_ok = ~sk.empty
        #: verified similarity of each folded document to its representative (NaN: not folded)
        self.similarity = np.full(sk.n, np.nan)
        self.last_similarity = np.zeros(0)
        self._sets: dict[int, np.ndarray] = {}  # doc -> sorted distinct shingle hashes (exact checks)
        self.ham = None
        if cfg.simhash is not None and sk.simhash is not None:
            from ..linking.bands import hamming_radius

            sc = cfg.simhash
            self.ham = hamming_radius(sc.threshold, sc.bits * sc.families)

    def bounds(self, r: int, cand: np.ndarray):
        """(lo, hi) agreement counts and the Jaccard threshold of the pairs of ``r`` and each of
        ``cand``: per candidate with per-source thresholds (the stricter of the two), else scalars."""
        mc = self.cfg.minhash
        assert mc is not None
        thr_doc = self.thresholds
        if thr_doc is None:
            return self.band[0], self.band[1], mc.threshold
        t = np.maximum(thr_doc[cand], thr_doc[r])  # a pair meets the stricter of its two sources
        lo, hi = agreement_bounds(t, mc.num_perm, mc.borderline if mc.verify == "auto" else 0.0)
        return lo, hi, t

    def __call__(self, r: int, cand: np.ndarray) -> np.ndarray:
        """uint8 stage bits per candidate: nonzero where ``cand[j]`` is verified similar to ``r``."""
        sk, cfg = self.sk, self.cfg
        bits = np.zeros(cand.size, dtype=np.uint8)
        self.stats.pairs_checked += int(cand.size)
        # cheap first, and a document records the first stage that verifies it (as the edges do)
        text = self.text_ok[cand] & self.text_ok[r]
        if cfg.exact:
            bits[text & (sk.exact[cand] == sk.exact[r])] = STAGE_EXACT
        todo = np.flatnonzero(bits == 0)
        val = np.where(bits != 0, 1.0, np.nan)
        if todo.size and cfg.minhash is not None and sk.minhash is not None:
            sel = todo[text[todo]]
            ok, v = self._minhash(r, cand[sel])
            bits[sel[ok]] = STAGE_MINHASH
            val[sel[ok]] = v[ok]
            todo = np.flatnonzero(bits == 0)
        if todo.size and cfg.text_simhash is not None and sk.text_simhash is not None:
            h = _popcount(sk.text_simhash[cand[todo]] ^ sk.text_simhash[r])
            ok = text[todo] & (h <= cfg.text_simhash.max_hamming)
            bits[todo[ok]] = STAGE_TEXT_SIMHASH
            val[todo[ok]] = np.cos(np.pi * h[ok] / 64)
            todo = np.flatnonzero(bits == 0)
        if todo.size and self.ham is not None:
            ok, v = self._simhash(r, cand[todo])
            bits[todo[ok]] = STAGE_SIMHASH
            val[todo[ok]] = v[ok]
        self.last_similarity = val
        return bits

    def _minhash(self, r: int, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(verified, similarity) per candidate. Under ``verify="auto"`` every candidate whose
        estimate reaches the borderline band is decided by exact Jaccard when the texts are at hand
        (a fold is a promise; there is one such check per member, not per edge); without texts the
        band rule of the edges decides."""
        sk, mc = self.sk, self.cfg.minhash
        assert sk.minhash is not None and mc is not None
        lo, hi, t = self.bounds(r, cand)
        if sk.sets32 is not None and mc.verify in ("auto", "exact"):
            # the live index: every document's (32-bit) shingle set is at hand
            assert sk.sets32_indptr is not None
            agree = (sk.minhash[cand] == sk.minhash[r]).sum(axis=1)
            val = agree / mc.num_perm
            ok = np.zeros(cand.size, dtype=bool)
            check = np.flatnonzero(agree >= lo) if mc.verify == "auto" else np.arange(cand.size)
            if check.size:
                jac = _exact_jaccard_csr(sk.sets32_indptr, sk.sets32, r, cand[check])
                ok[check] = jac >= (t[check] if np.ndim(t) else t)
                val[check] = jac
                self.stats.exact_checks += int(check.size)
            return ok, val
        if mc.verify == "exact" and sk.shingle_indptr is not None and sk.shingle_hashes is not None:
            jac = _exact_jaccard_csr(sk.shingle_indptr, sk.shingle_hashes, r, cand)
            return jac >= t, jac
        agree = (sk.minhash[cand] == sk.minhash[r]).sum(axis=1)
        val = agree / mc.num_perm
        ok = agree >= hi
        consider = agree >= lo
        border = consider & ~ok
        off = self.source.offset if self.source is not None else 0
        if mc.verify == "auto" and self.source is not None:
            border = consider
        elif mc.verify == "exact" and self.source is not None:  # the Dask engine: texts, no shingle rows
            ok[:] = False
            border = np.ones_like(consider)
        if not border.any():
            return ok, val
        have = border & (cand >= off) & (r >= off) if self.source is not None else np.zeros_like(border)
        if have.any():
            sets = self.shingle_sets(np.concatenate([[r], cand[have]]))
            jac = np.array([exact_jaccard(sets[0], b) for b in sets[1:]])
            ok[np.flatnonzero(have)] = jac >= (t[have] if np.ndim(t) else t)
            val[np.flatnonzero(have)] = jac
            self.stats.exact_checks += int(have.sum())
        rest = border & ~have
        ok[rest] = (ok | (2 * agree >= lo + hi))[rest]
        return ok, val

    def shingle_sets(self, docs: np.ndarray) -> list[np.ndarray]:
        """Sorted distinct shingle hashes of documents whose texts are at hand, re-shingled in one
        kernel call for all those not cached yet (see :meth:`prefetch`)."""
        missing = [int(d) for d in docs.tolist() if int(d) not in self._sets]
        if missing:
            from ..sketches.source import reshingle

            assert self.source is not None
            missing = list(dict.fromkeys(missing))
            starts, counts, hashes = reshingle(self.source, missing, self.cfg)
            for d, s0, c in zip(missing, starts.tolist(), counts.tolist()):
                self._sets[d] = hashes[s0: s0 + c]
        return [self._sets[int(d)] for d in docs.tolist()]

    def prefetch(self, docs: np.ndarray) -> None:
        """Shingle, in one call, the documents a batch of components may check exactly; forget the
        previous batch (memory stays bounded by the batch)."""
        self._sets.clear()
        mc, sk = self.cfg.minhash, self.sk
        if mc is None or sk.minhash is None or mc.verify != "auto" or self.source is None or sk.sets32 is not None:
            return
        docs = docs[(docs >= self.source.offset) & self.text_ok[docs]]
        if docs.size:
            self.shingle_sets(docs)

    def _simhash(self, r: int, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sk, sc = self.sk, self.cfg.simhash
        assert sk.simhash is not None and sc is not None
        if sc.verify == "exact" and sk.vectors is not None:
            cos = sk.vectors[cand] @ sk.vectors[r]
            return cos >= sc.threshold - 1e-12, cos.astype(np.float64)
        h = _popcount(sk.simhash[cand] ^ sk.simhash[r]).reshape(cand.size, -1).sum(axis=1)
        return h <= self.ham, np.cos(np.pi * h / (sc.bits * sc.families))


def _popcount(x: np.ndarray) -> np.ndarray:
    """Bits set per uint64 element (any shape -> same shape)."""
    b = np.ascontiguousarray(x, dtype=np.uint64)
    return _POP8[b.view(np.uint8)].reshape(*b.shape, 8).sum(axis=-1, dtype=np.int64)


def _exact_jaccard_csr(indptr: np.ndarray, hashes: np.ndarray, r: int, cand: np.ndarray) -> np.ndarray:
    a = hashes[indptr[r]: indptr[r + 1]]
    return np.array([exact_jaccard(a, hashes[indptr[c]: indptr[c + 1]]) for c in cand.tolist()], dtype=np.float64)
