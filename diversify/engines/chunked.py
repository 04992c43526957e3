"""A chunked corpus with its pages: :func:`build_chunks` (docs/recipes/chunked-rag.md).

Chunks of near-duplicate pages rarely line up word for word: one version's chunk starts a
paragraph earlier, or is the short tail of its page. Their Jaccard similarity then falls below any
useful threshold although one chunk's text is all in the other. With each chunk's *parent* (the
page it was cut from) the build does three things:

1. the chunks are clustered as any corpus is (:func:`diversify.build`, the given config);
2. the pages (each the concatenation of its chunks) are clustered with the same config;
3. inside each page cluster, a chunk that step 1 left alone is folded under a cluster's
   representative chunk of *another page* of that cluster when at least ``containment`` of its
   distinct shingles are shingles of that representative (containment ``|A ∩ B| / |A|``, exact,
   on the build's own shingle sets). Representatives are tried largest first (ties: the earlier
   chunk), so a chunk goes under the largest representative that contains it.

What a fold then promises: a chunk folded in step 3 is covered (``containment``) by the
representative the artifact names; a chunk folded in step 1 is as similar to its cluster as
``build`` promises. Chunks of pages no other page resembles are left as step 1 clustered them, so a
chunk is never folded for sharing text with an unrelated page's chunk unless it is a near-copy of
that chunk (step 1).

Cost: step 3 compares, per page cluster, each representative with the shingles of the chunks still
unfolded in that cluster (a sorted-array lookup): about ``representatives x unfolded shingles``
per page cluster, nothing across page clusters.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any, Optional

import numpy as np

from ..artifact import ClusterMap
from ..config import resolve_config
from ..errors import ConfigError, DiversifyWarning, InputError, InputTypeError
from ..stages import STAGE_CONTAINMENT
from ..text.sets import sorted_unique_shingles
from .finish import BuildResult
from .local import build

__all__ = ["build_chunks", "DEFAULT_CONTAINMENT"]

#: share of a chunk's distinct shingles its representative must hold for a step-3 fold
DEFAULT_CONTAINMENT = 0.8


def _sized(x: Any) -> bool:
    """A list, tuple, numpy array or other sized iterable, not one str."""
    return not isinstance(x, (str, bytes)) and hasattr(x, "__len__") and hasattr(x, "__iter__")


def _check(texts: Any, parents: Any, containment: Any) -> tuple[list[str], list]:
    if not _sized(texts):
        raise InputTypeError(f"`texts` must be a sequence of chunk texts (a list of str); got {type(texts).__name__}. "
                             "Pass list(texts).")
    if not _sized(parents):
        raise InputTypeError(f"`parents` must be a sequence with one page id per chunk; got "
                             f"{type(parents).__name__}. Pass a list such as ['page-1', 'page-1', 'page-2'].")
    if len(parents) != len(texts):
        raise InputError(f"`parents` must have one page id per chunk: {len(texts)} texts, got {len(parents)} parents. "
                         "Give each chunk the id of the page it was cut from.")
    for i, p in enumerate(parents):
        if p is None or not isinstance(p, Hashable) or isinstance(p, float) and math.isnan(p):
            raise InputTypeError(f"`parents[{i}]` must be a page id (str or int); got {p!r}. Every chunk needs the "
                                 "id of its page.")
    if isinstance(containment, bool) or not isinstance(containment, (int, float)) or not 0 < containment <= 1:
        raise ConfigError(f"`containment` must be a number in (0, 1]; got {containment!r}. The default "
                          f"{DEFAULT_CONTAINMENT} folds a chunk whose shingles are 80% in its representative.")
    return list(texts), [p.item() if isinstance(p, np.generic) else p for p in parents]


def _pages(texts: list[str], parents: list) -> tuple[list[str], np.ndarray]:
    """Each page's text (its chunks joined by blank lines, in order) and each chunk's page number."""
    number: dict = {}
    page_of = np.empty(len(parents), dtype=np.int64)
    for i, p in enumerate(parents):
        page_of[i] = number.setdefault(p, len(number))
    pieces: list[list[str]] = [[] for _ in number]
    for i, t in enumerate(texts):
        pieces[page_of[i]].append(t)
    return ["\n\n".join(p) for p in pieces], page_of


def _fold_group(members: np.ndarray, counts: np.ndarray, starts: np.ndarray, hashes: np.ndarray,
                page_of: np.ndarray, free: np.ndarray, targets: np.ndarray, need: np.ndarray,
                under: np.ndarray) -> None:
    """Step 3 in one page cluster: ``under[x] = t`` for each free chunk x folded under target t."""
    order = members[np.lexsort((members, -counts[members]))]
    open_ = order[free[order] & (counts[order] > 0)]
    for t in order[targets[order]]:
        if under[t] >= 0 and under[t] != t:
            continue  # folded under a larger representative already
        cand = open_[(page_of[open_] != page_of[t]) & (under[open_] < 0) & (need[open_] <= counts[t])]
        cand = cand[cand != t]
        if cand.size == 0:
            continue
        ref = hashes[starts[t]:starts[t] + counts[t]]
        lens = counts[cand]
        owner = np.repeat(np.arange(cand.size), lens)
        at = np.repeat(starts[cand] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        values = hashes[at]
        pos = np.minimum(np.searchsorted(ref, values), ref.size - 1)
        inter = np.bincount(owner, weights=ref[pos] == values, minlength=cand.size)
        hit = cand[inter >= need[cand]]
        under[hit] = t
        if free[t] and under[t] < 0:
            under[t] = t  # taken as a representative: never folded under a later one


def _relabel(cluster: np.ndarray) -> np.ndarray:
    """Cluster ids as the artifact states them: the index of each cluster's first member."""
    first = np.full(int(cluster.max()) + 1, cluster.size, dtype=np.int64)
    np.minimum.at(first, cluster, np.arange(cluster.size, dtype=np.int64))
    return first[cluster]


def build_chunks(texts: Sequence[str], *, parents: Sequence, ids: Optional[Sequence] = None,
                 config: Any = None, containment: float = DEFAULT_CONTAINMENT, page_config: Any = None,
                 metadata: Optional[dict] = None, created_at: Optional[str] = None) -> BuildResult:
    """Cluster chunks, then fold chunks covered by a chunk of a near-duplicate page (module docstring).

    Parameters
    ----------
    texts : sequence of str
        The chunks (e.g. from :func:`diversify.corpus.chunking.chunk_paragraphs`), in page order.
    parents : sequence
        One page id (str or int) per chunk: the page it was cut from.
    ids : sequence, optional
        One unique id per chunk (what the vector store uses); default 0..n-1.
    config : BuildConfig or dict, optional
        The chunk build's config (``incremental`` is turned off: ``add`` cannot keep the page
        scope). Default ``BuildConfig()``.
    containment : float in (0, 1], default 0.8
        Share of a chunk's distinct shingles its representative must hold for a step-3 fold.
    page_config : BuildConfig or dict, optional
        The page build's config; default the chunk build's.

    Returns
    -------
    BuildResult
        Its ``cluster_map`` has the step-3 folds; their ``doc_stages`` carry the containment bit;
        ``report["chunks"]`` counts pages, page clusters and step-3 folds.
    """
    texts, parents = _check(texts, parents, containment)
    cfg = resolve_config(config)
    if cfg.minhash is None:
        raise ConfigError("`config` has no MinHash stage (minhash=None); build_chunks compares chunk texts. "
                          "Keep the default MinHash stage.")
    cfg = cfg.model_copy(update={"incremental": False})
    pcfg = cfg if page_config is None else resolve_config(page_config).model_copy(update={"incremental": False})
    chunked = build(texts, ids=ids, config=cfg, metadata=metadata, created_at=created_at)
    page_texts, page_of = _pages(texts, parents)
    with warnings.catch_warnings():  # the pages only scope the chunks: their fold share is no news to the user
        warnings.simplefilter("ignore", DiversifyWarning)
        pages = build(page_texts, config=pcfg)
    starts, counts, hashes = sorted_unique_shingles(texts, cfg.text, cfg.seed)
    starts, counts = starts.astype(np.int64), counts.astype(np.int64)
    cluster = np.asarray(chunked.cluster_ids, dtype=np.int64)
    sizes = np.bincount(cluster, minlength=cluster.size)
    free = sizes[cluster] == 1
    targets = np.asarray(chunked.is_representative, dtype=bool)
    need = np.ceil(counts * float(containment) - 1e-9).astype(np.int64)
    under = np.full(cluster.size, -1, dtype=np.int64)
    page_cluster = np.asarray(pages.cluster_ids, dtype=np.int64)[page_of]
    by_group = np.argsort(page_cluster, kind="stable")
    cuts = np.flatnonzero(np.diff(page_cluster[by_group])) + 1
    groups = 0
    for members in np.split(by_group, cuts):
        if np.unique(page_of[members]).size > 1:
            groups += 1
            _fold_group(members, counts, starts, hashes, page_of, free, targets, need, under)
    folded = np.flatnonzero((under >= 0) & (under != np.arange(under.size)))
    cluster = cluster.copy()
    cluster[folded] = cluster[under[folded]]
    cluster = _relabel(cluster)
    stages = np.asarray(chunked.doc_stages, dtype=np.uint8).copy()
    stages[folded] |= STAGE_CONTAINMENT
    is_rep = np.asarray(chunked.is_representative, dtype=bool).copy()
    is_rep[folded] = False
    summary = {"pages": len(page_texts), "page_clusters_with_copies": groups, "containment": float(containment),
               "containment_folds": int(folded.size)}
    return _result(chunked, cluster, is_rep, stages, summary)


def _result(chunked: BuildResult, cluster: np.ndarray, is_rep: np.ndarray, stages: np.ndarray,
            summary: dict) -> BuildResult:
    cm = chunked.cluster_map
    cmap = ClusterMap.from_arrays(
        cm.ids, cluster, is_rep, stages, np.asarray(cm.doc_lengths),
        config=cm.config, fingerprint=cm.fingerprint, seed=cm.seed, hash_scheme=cm.hash_scheme,
        build_info=dict(cm.build_info, chunks=summary), metadata=cm.metadata, created_at=cm.created_at)
    return dataclasses.replace(chunked, cluster_map=cmap, cluster_ids=np.asarray(cmap.cluster_ids),
                               is_representative=is_rep, doc_stages=stages, report=dict(chunked.report, chunks=summary))
