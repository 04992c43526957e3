"""``diversify demo``: the whole idea in one run, on generated data, with no network.

1. Generate a seeded corpus with planted near-copies (word edits at 0-2%) and boilerplate pages.
2. Build clusters (exact stage + MinHash LSH, verified) and save the artifact.
3. Score the build against exact Jaccard truth on the planted pairs.
4. Run a few queries through a tiny in-process vector search and show each top-5 before and
   after max-one-per-cluster.
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from ._arrays import unique_sorted


def _title(text: str, n: int = 9) -> str:
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


def demo_config(threshold: float):
    """The demo's build config: the defaults, MinHash at ``threshold``."""
    from diversify.config import BuildConfig, MinHashConfig

    return BuildConfig(minhash=MinHashConfig(threshold=threshold))


def run_demo(*, n_docs: int = 20000, seed: int = 0, threshold: float = 0.8, queries: int = 3, out=None) -> int:
    import sys

    import diversify
    from diversify.corpus.datagen import generate_corpus, generate_vectors

    out = out or sys.stdout
    say = lambda *a: print(*a, file=out)  # noqa: E731
    t0 = time.perf_counter()
    corpus = generate_corpus(n_docs, words_per_doc=300, dup_fraction=0.2, edit_rate=(0.0, 0.02),
                             boilerplate_fraction=0.05, seed=seed)
    vectors = generate_vectors(corpus, dim=64, seed=seed)
    t_gen = time.perf_counter() - t0
    say(f"generated {len(corpus):,} documents (~300 words; 20% planted copies at 0-2% word edits; "
        f"5% boilerplate pages) in {t_gen:.1f}s")

    cfg = demo_config(threshold)
    t1 = time.perf_counter()
    res = diversify.build(corpus.texts, ids=corpus.ids, config=cfg, metadata={"demo_seed": str(seed)})
    t_build = time.perf_counter() - t1
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "demo.dvf")
        res.save(path)
        size = os.path.getsize(path)
        cmap = diversify.load(path)
        say(f"built in {t_build:.2f}s ({len(corpus) / t_build:,.0f} docs/s incl. JIT warm-up); artifact {size:,} bytes")
        say("")
        say(res.summary())
        say("")

        _report_quality(say, corpus, res, cfg, threshold)
        _show_queries(say, corpus, vectors, res, cmap, seed=seed, queries=queries)
    say(f"demo finished in {time.perf_counter() - t0:.1f}s")
    return 0


def _report_quality(say, corpus, res, cfg, threshold: float) -> None:
    """Score the build against exact Jaccard truth on the planted (non-boilerplate) pairs."""
    from diversify.text import exact_jaccard, sorted_unique_shingles

    pairs = corpus.planted_pairs()
    bp = corpus.is_boilerplate
    pairs = pairs[~(bp[pairs[:, 0]] | bp[pairs[:, 1]])]
    docs, rows = np.unique(pairs, return_inverse=True)  # shingle only the documents of the pairs
    set_starts, set_sizes, set_hashes = sorted_unique_shingles([corpus.texts[d] for d in docs.tolist()], cfg.text,
                                                               cfg.seed)
    sets = [set_hashes[s : s + c] for s, c in zip(set_starts.tolist(), set_sizes.tolist())]
    jac = np.array([exact_jaccard(sets[i], sets[j]) for i, j in rows.reshape(-1, 2).tolist()], dtype=np.float64)
    same = res.cluster_ids[pairs[:, 0]] == res.cluster_ids[pairs[:, 1]]
    above = jac >= threshold
    say(f"planted near-duplicate pairs: {len(pairs):,}; with exact Jaccard >= {threshold}: {int(above.sum()):,}")
    say(f"  found (same cluster): {int((same & above).sum()):,} of {int(above.sum()):,} "
        f"({(same & above).sum() / max(1, above.sum()):.1%} recall)")
    say(f"  planted pairs below the threshold that were still joined: {int((same & ~above).sum()):,} of {int((~above).sum()):,}")
    n_bp = int(bp.sum())
    if n_bp:
        bp_clusters = unique_sorted(res.cluster_ids[bp]).size
        say(f"  boilerplate pages: {n_bp:,} folded into {bp_clusters:,} cluster(s)")
    say("")


def _show_queries(say, corpus, vectors, res, cmap, *, seed: int, queries: int) -> None:
    """A tiny in-process vector search: each query's top-5 before and after max-one-per-cluster."""
    from diversify.online import Hit, select

    rng = np.random.default_rng(seed)
    bp = corpus.is_boilerplate
    clusters, counts = np.unique(res.cluster_ids[~bp], return_counts=True)
    big = clusters[counts >= 3]
    picks = rng.choice(big, size=min(queries, big.size), replace=False) if big.size else big[:0]
    for q, cid in enumerate(picks, 1):
        qv = vectors[int(cid)] + 0.35 * rng.standard_normal(vectors.shape[1]) / np.sqrt(vectors.shape[1])
        qv = qv / np.linalg.norm(qv)
        scores = vectors @ qv
        top = np.argsort(-scores, kind="stable")[:50]
        hits = [Hit(corpus.ids[i], float(scores[i])) for i in top]
        row_of: dict[object, int] = {h.id: int(i) for h, i in zip(hits, top)}
        cids = cmap.lookup([h.id for h in hits])
        say(f"query {q}: a noisy copy of the vector of {corpus.ids[int(cid)]}")
        say("  before (plain top-5):")
        for h, c, i in list(zip(hits, cids, top))[:5]:
            say(f"    {h.score:.3f}  {h.id}  cluster {c:<6}  {_title(corpus.texts[i])}")
        result = select(hits, cids, k=5, max_per_cluster=1)
        say("  after (max one per cluster):")
        for kept in result.hits:
            i = row_of[kept.id]
            note = f"  [{kept.omitted} similar omitted]" if kept.omitted else ""
            say(f"    {kept.score:.3f}  {kept.id}  cluster {kept.cluster_id:<6}  {_title(corpus.texts[i])}{note}")
        say("")
