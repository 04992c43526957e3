"""Shared by the text MinHash suites (build, boilerplate, scaling, simhash_text): exact truth,
one tool run in a worker, scores."""

from __future__ import annotations

import time

import numpy as np

from ..corpora import corpus_params, load_texts
from ..paths import log, now
from ..protocol import Task
from ..worker import run_job

NUM_PERM, THRESHOLD = 128, 0.8
TOOL_VARIANTS = {
    "diversify": ("diversify", {}),
    "diversify-exact": ("diversify", {"verify": "exact"}),
    "rensa": ("rensa", {}),
    "datasketch": ("datasketch", {}),
}
TOOLS = tuple(TOOL_VARIANTS)


def _truth_run(texts, args: dict) -> dict:
    from ..reference import ShingleHasher
    from ..truth import similarity_join

    t0 = time.perf_counter()
    hasher = ShingleHasher()
    ptrs, vals = [np.zeros(1, dtype=np.int64)], []
    for s in range(0, len(texts), 5000):
        ip, hs = hasher.hash_many(texts[s : s + 5000])
        ptrs.append(ip[1:] + ptrs[-1][-1])
        vals.append(hs)
    texts.clear()  # the join needs the memory more than the texts
    indptr = np.concatenate(ptrs)
    hashes = np.concatenate(vals) if vals else np.zeros(0, np.uint64)
    del vals
    t1 = time.perf_counter()
    pairs, jac, stats = similarity_join(indptr, hashes, args["threshold"])
    stats.update(hash_s=t1 - t0, join_s=time.perf_counter() - t1)
    return dict(arrays=dict(pairs=pairs, jaccard=jac), stats=stats)


# Worker task: exact pairs with Jaccard ≥ threshold; args = {"corpus": prefix, "threshold": t}.
TRUTH = Task(load=lambda args: load_texts(args["corpus"]), warm=lambda texts, args: None, run=_truth_run)


def truth_for(prefix: str, threshold: float = THRESHOLD) -> tuple[np.ndarray, dict]:
    """Exact truth pairs of a corpus file (computed once per corpus and threshold) and their stats."""
    log(f"exact truth (threshold {threshold}) for {prefix.rsplit('/', 1)[-1]} ...")
    rec, arrays = run_job("benchmarks.suites._minhash:TRUTH", dict(corpus=prefix, threshold=threshold),
                          tag="truth", priority=False, reuse=True)
    stats = dict(rec["stats"], peak_rss_mb=rec["rss_peak_mb"])
    return arrays["pairs"], stats


def run_tool(prefix: str, tool: str, kwargs: dict | None = None, tag: str | None = None,
             threads: int | None = None) -> tuple[dict, dict]:
    """One MinHash tool on a corpus file in a worker: (record, {"labels", maybe "labels_verified"})."""
    kwargs = dict(num_perm=NUM_PERM, threshold=THRESHOLD, **(kwargs or {}))
    log(f"{tag or tool} on {prefix.rsplit('/', 1)[-1]} ...")
    result = run_job("benchmarks.tools.minhash:TASK", dict(tool=tool, corpus=prefix, kwargs=kwargs),
                     tag=f"{tool}-{prefix.rsplit('/', 1)[-1]}", threads=threads)
    if result is None:
        raise RuntimeError(f"{tag or tool} timed out")
    return result


def scores(labels: np.ndarray, truth_pairs: np.ndarray, truth_labels: np.ndarray) -> dict:
    from ..metrics import cluster_pair_scores, pair_scores

    return dict(pairs=pair_scores(labels, truth_pairs), components=cluster_pair_scores(labels, truth_labels))


def score_row(rec: dict, labels: dict, truth_pairs, truth_labels) -> dict:
    row = dict(rec)
    row["scores"] = scores(labels["labels"], truth_pairs, truth_labels)
    if "labels_verified" in labels:
        row["scores_verified"] = scores(labels["labels_verified"], truth_pairs, truth_labels)
    n = rec["n_docs"]
    t = rec["timings"]
    row["docs_per_s"] = n / t["total"]
    if "total_verified" in t:
        row["docs_per_s_verified"] = n / t["total_verified"]
    sk = t.get("sketch_incl_tokenize") or t.get("sketch")
    row["signatures_per_s"] = n / sk if sk else None
    return row


def compare(prefix: str, tools, suite: str) -> dict:
    """Every tool on one corpus file against its exact truth: the build/boilerplate payload."""
    from ..env import environment
    from ..truth import components

    params = corpus_params(prefix)
    n = params["n_docs"]
    truth_pairs, truth_stats = truth_for(prefix)
    truth_labels = components(n, truth_pairs)
    rows = {}
    for name in tools:
        tool, kw = TOOL_VARIANTS[name]
        rec, labels = run_tool(prefix, tool, kw, tag=name)
        r = rows[name] = score_row(rec, labels, truth_pairs, truth_labels)
        log(f"  {name}: {r['docs_per_s']:,.0f} docs/s, RSS +{r['rss_delta_mb']:,.0f} MiB, "
            f"pair F1 {r['scores']['pairs']['f1']:.4f}")
    return dict(suite=suite, created=now(), env=environment(), corpus=params, num_perm=NUM_PERM,
                threshold=THRESHOLD, truth=truth_stats, tools=rows)
