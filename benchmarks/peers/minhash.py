"""MinHash over text: diversify and its peers (datasketch, rensa), each run the way its
documentation suggests for bulk use.

Every runner takes ``(texts, ids, num_perm, threshold)`` and returns a dict with ``labels``
(cluster label per document, from union-find over LSH query results), optionally
``labels_verified`` (candidates kept only when the tool's own Jaccard estimate reaches the
threshold) and ``timings`` (seconds per stage, ``total`` = wall time from raw texts to labels).
Peers get shingles as Python strings of 5 words under the same normalization as ours.
"""

from __future__ import annotations

import time

import numpy as np

from .. import lib
from ..corpora import load_texts, small_texts
from ..metrics import labels_from_pairs
from ..protocol import Task
from ..reference import shingle_strings

TOOLS = ("diversify", "rensa", "datasketch")
CHUNK = 1024


def _cluster_and_verify(sigs, results, threshold, t_start, t_tok, t_sk, t0, t1) -> dict:
    """A peer's clusters from its LSH query results, before and after checking each candidate's
    MinHash estimate against the threshold, with the timings of every phase."""
    clock = time.perf_counter
    pairs = _pairs_from_lists(results)
    labels = labels_from_pairs(len(sigs), pairs)
    t2 = clock()
    total = t2 - t_start
    keep = np.fromiter((sigs[i].jaccard(sigs[j]) >= threshold for i, j in pairs.tolist()), dtype=bool,
                       count=len(pairs))
    labels_v = labels_from_pairs(len(sigs), pairs[keep])
    t3 = clock()
    return dict(labels=labels, labels_verified=labels_v, n_pairs=int(len(pairs)),
                timings=dict(tokenize=t_tok, sketch=t_sk, lsh=t1 - t0, cluster=t2 - t1, total=total,
                             verify=t3 - t2, total_verified=total + (t3 - t2)))


def _pairs_from_lists(lists) -> np.ndarray:
    """Candidate pairs (i < j, unique) from per-document query results (lists of int keys)."""
    lens = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter((k for x in lists for k in x), dtype=np.int64, count=int(lens.sum()))
    left = np.repeat(np.arange(len(lists), dtype=np.int64), lens)
    keep = flat != left
    a, b = left[keep], flat[keep]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    n = max(len(lists), 1)
    key = np.unique(lo * n + hi)
    return np.stack([key // n, key % n], axis=1)


def run_datasketch(texts, ids, *, num_perm=128, threshold=0.8) -> dict:
    from datasketch import MinHash, MinHashLSH

    t_start = time.perf_counter()
    proto = MinHash(num_perm=num_perm, seed=1)
    perms = proto.permutations
    t_tok = t_sk = 0.0
    sigs = []
    clock = time.perf_counter
    for text in texts:
        a = clock()
        sh = [s.encode("utf-8") for s in shingle_strings(text)]
        b = clock()
        m = MinHash(num_perm=num_perm, seed=1, permutations=perms, scheme=proto.scheme)
        m.update_batch(sh)  # the batch path: one numpy pass over all shingle hashes
        sigs.append(m)
        t_tok += b - a
        t_sk += clock() - b
    t0 = clock()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for i, m in enumerate(sigs):
            session.insert(i, m, check_duplication=False)
    results = [lsh.query(m) for m in sigs]
    t1 = clock()
    out = _cluster_and_verify(sigs, results, threshold, t_start, t_tok, t_sk, t0, t1)
    return dict(labels=out["labels"], labels_verified=out["labels_verified"], timings=out["timings"],
                params=dict(bands=lsh.b, rows=lsh.r, candidates=out["n_pairs"],
                            hash="sha1 (default)", update="MinHash.update_batch"))


def rensa_bands(num_perm: int, threshold: float) -> int:
    """Bands for RMinHashLSH (it needs them explicitly and they must divide num_perm): the divisor
    whose S-curve midpoint (1/b)**(1/r) is the largest one not above the threshold (16 × 8 at 0.8),
    so pairs at the threshold are likely candidates and the peer's own verify decides."""
    best = num_perm
    for b in sorted(d for d in range(1, num_perm + 1) if num_perm % d == 0):
        if (1.0 / b) ** (b / num_perm) <= threshold:
            return b
    return best


def run_rensa(texts, ids, *, num_perm=128, threshold=0.8, bands=None) -> dict:
    from rensa import RMinHash, RMinHashLSH

    bands = bands or rensa_bands(num_perm, threshold)
    clock = time.perf_counter
    t_start = clock()
    t_tok = t_sk = 0.0
    sigs = []
    for s in range(0, len(texts), CHUNK):
        a = clock()
        toks = [shingle_strings(t) for t in texts[s : s + CHUNK]]
        b = clock()
        # Full-set R-MinHash (the accurate path), built in bulk in Rust.
        sigs.extend(RMinHash.from_token_sets(toks, num_perm=num_perm, seed=42))
        t_tok += b - a
        t_sk += clock() - b
        del toks
    t0 = clock()
    lsh = RMinHashLSH(threshold=threshold, num_perm=num_perm, num_bands=bands)
    lsh.insert_many(sigs, 0)
    results = lsh.query_all(sigs)
    t1 = clock()
    out = _cluster_and_verify(sigs, results, threshold, t_start, t_tok, t_sk, t0, t1)
    return dict(labels=out["labels"], labels_verified=out["labels_verified"], timings=out["timings"],
                params=dict(bands=bands, rows=num_perm // bands, candidates=out["n_pairs"],
                            sketch="RMinHash.from_token_sets (full set)", lsh="RMinHashLSH.insert_many + query_all"))


def run_diversify(texts, ids, *, num_perm=128, threshold=0.8, **minhash_kwargs) -> dict:
    import diversify

    clock = time.perf_counter
    cfg = lib.minhash_config(num_perm, threshold, **minhash_kwargs)
    t0 = clock()
    res = diversify.build(texts=texts, ids=ids, config=cfg, progress=False)
    total = clock() - t0
    timings = {k: float(v) for k, v in res.timings.items()}
    timings["total"] = total
    # The default path fuses UTF-8 encoding, tokenizing, shingling and MinHash in one kernel, so
    # our "sketch" time includes tokenization (the peers' does not: it is reported separately).
    timings["sketch_incl_tokenize"] = timings.get("sketch", 0.0) + timings.get("signatures", 0.0)
    stats = res.stats
    return dict(labels=np.asarray(res.cluster_ids, dtype=np.int64), timings=timings,
                params=dict(config=cfg.model_dump(mode="json"), lsh=stats.get("lsh"),
                            candidates=stats.get("candidates"), verified=stats.get("verified"),
                            merged=stats.get("merged")))


def warm_up(tool: str, **kwargs) -> None:
    """Compile JIT code and load libraries on a small corpus before anything is measured."""
    texts = small_texts()
    RUNNERS[tool](texts, [f"doc-{i:07d}" for i in range(len(texts))], **kwargs)


RUNNERS = {"diversify": run_diversify, "rensa": run_rensa, "datasketch": run_datasketch}


def _load(args: dict):
    texts = load_texts(args["corpus"])
    return texts, [f"doc-{i:07d}" for i in range(len(texts))]


def _run(data, args: dict) -> dict:
    texts, ids = data
    out = RUNNERS[args["tool"]](texts, ids, **args["kwargs"])
    arrays = {k: out[k] for k in ("labels", "labels_verified") if k in out}
    return dict(arrays=arrays, tool=args["tool"], kwargs=args["kwargs"], n_docs=len(texts), timings=out["timings"],
                params=out.get("params", {}), text_mb=sum(map(len, texts)) / 2**20)


# Worker task: args = {"tool": name in RUNNERS, "corpus": corpus file prefix, "kwargs": {...}}.
TASK = Task(load=_load, warm=lambda data, args: warm_up(args["tool"], **args["kwargs"]), run=_run)
