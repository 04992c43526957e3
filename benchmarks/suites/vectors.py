"""vectors: the embedding route, diversify's SimHash stage vs FAISS (flat range search, HNSW).

Every tool ends with union-find over the pairs it accepted; clusterings are scored against the
exact cosine pairs (cos ≥ t: FAISS ``IndexFlatIP.range_search`` slightly below t, re-checked in
float64). Each measurement runs in a worker (warm-up on 300 vectors, peak RSS beyond the loaded
vectors). Modes: the generated runs (+ the MRPC/MiniLM row unless ``--no-real``), ``--real-only``
(add the MRPC row to the stored file), ``--scale N DIM`` (add a diversify-only row without
all-pairs truth, recall on the planted pairs).
"""

from __future__ import annotations

from ..markdown import command, num, skipped, table
from . import Suite
from ._vectors import SCALE_TOOLS

SUITE = Suite(
    name="vectors",
    summary="SimHash over vectors vs FAISS flat range search and HNSW at 10k/100k (cosine 0.9/0.95): time, CPU s, "
            "peak RSS, pair P/R/F1 vs exact cosine; MRPC embedded with MiniLM; a 1M scale row (--scale)",
    results=("vectors.json",), render="benchmarks.suites.vectors:vectors_section",
    peers=("faiss-cpu",), data=("mrpc",), quick={"n": [2000], "dims": [64], "no_real": True}, takes="~30 min")

THRESHOLDS = (0.9, 0.95)


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=[10_000, 10_000, 100_000])
    p.add_argument("--dims", type=int, nargs="+", default=[64, 384, 128], help="one dim per --n")
    p.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--no-real", action="store_true", help="skip the MRPC / MiniLM row")
    p.add_argument("--real-only", action="store_true", help="add only the MRPC / MiniLM row to the stored results")
    p.add_argument("--scale", type=int, nargs=2, metavar=("N", "DIM"),
                   help="add a diversify-only scale row (no all-pairs truth) to the stored results, e.g. 1000000 64")
    p.add_argument("--scale-variants", nargs="+", default=["diversify"], choices=list(SCALE_TOOLS),
                   help="diversify settings, or the FAISS IVF peer, measured in the scale row")


def run(args, ctx) -> list:
    from ._vectors import run_real_only, run_scale, run_suite

    if args.scale:
        return [run_scale(args, ctx)]
    if args.real_only:
        return [run_real_only(args, ctx)]
    if len(args.dims) != len(args.n):
        raise SystemExit("vectors: give one --dims value per --n value")
    return [run_suite(args, ctx)]


# --- RESULTS.md section

DEFAULT_COMMAND = "python -m benchmarks run --suite vectors"
HEAD = ["t", "tool", "time (s)", "CPU s", "vectors/s", "peak RSS beyond input", "candidates", "pair P", "pair R",
        "pair F1", "comp. F1", "load avg (1 min)"]


def _tool_name(name: str, p: dict) -> str:
    if p.get("lsh"):
        return f"{name} (b={p['lsh']['bands']}, r={p['lsh']['rows']})"
    if "k" in p:
        return f"{name} (k={p['k']}, efSearch={p['efSearch']})"
    return name


def _cells(t, name: str, r: dict, labeled: bool) -> list:
    width = len(HEAD) + labeled
    if "skipped" in r:
        return skipped([t, name], r["skipped"], width)
    s, p = r["scores"]["pairs"], r["params"]
    one = " ¹" if r.get("one_pass_for_thresholds") else ""
    cells = [t, _tool_name(name, p), f"{r['timings']['total']:.2f}{one}", f"{r['cpu_s']:.1f}{one}",
             num(r["vectors_per_s"]), f"{num(r['rss_delta_mb'])} MiB", num(p.get("candidates")),
             f"{s['precision']:.4f}", f"{s['recall']:.4f}", f"{s['f1']:.4f}", f"{r['scores']['components']['f1']:.4f}",
             f"{r['loadavg_before'][0]:.1f} → {r['loadavg_after'][0]:.1f}"]
    if labeled and "labels_mrpc" in r:
        m = r["labels_mrpc"]
        cells.append(f"{m['precision']:.3f} / {m['recall']:.3f} / {m['f1']:.3f}")
    return cells


def _table(run: dict, thresholds, labeled: bool = False) -> list[str]:
    head = HEAD + ["MRPC label P / R / F1"] * labeled
    rows = [_cells(t, name, r, labeled) for t in thresholds for name, r in run["tools"][str(t)].items()]
    return table(head, "ll" + "r" * (len(HEAD) - 2) + "l" * labeled, rows)


def _intro(results: dict) -> list[str]:
    env = results.get("env", {})
    v = env.get("versions", {})
    cmd = command(results.get("command"), DEFAULT_COMMAND)
    if results.get("command_real"):
        cmd += "` then `" + command(results["command_real"], DEFAULT_COMMAND)
    h = results["hnsw"]
    c = results.get("corpus", {})
    return [
        "## Embedding route: diversify SimHash vs FAISS", "",
        f"Command: `{cmd}` (writes `benchmarks/results/vectors.json`). Measured {results.get('created')} on "
        f"{env.get('cpu')} · {env.get('usable_cpus')} CPUs (numba threads {env.get('numba_threads')}, FAISS OpenMP "
        f"threads {env.get('faiss_omp_threads')}) · {env.get('memory_gb')} GB RAM · diversify "
        f"{v.get('diversify')} at {str(env.get('diversify_commit'))[:30]} · faiss-cpu {v.get('faiss-cpu')} · "
        f"numpy {v.get('numpy')}.", "",
        "Every tool ends with union-find over the pairs it accepted; scores are pair precision/recall/F1 of "
        "the resulting clusters (all pairs inside a cluster) against **exact cosine ≥ t** pairs (FAISS flat "
        "range search slightly below t, re-checked in float64), and F1 against the truth's connected "
        "components ('comp. F1', which forgives transitive pairs). diversify: "
        "`build(vectors=..., config=BuildConfig(minhash=None, exact=False, simhash=SimHashConfig(threshold=t, ...)))`, "
        "256 bits, bands from the S-curve unless `pigeonhole=True`; candidates verified by exact cosine. "
        f"HNSW: `IndexHNSWFlat(d, M={h['M']}, METRIC_INNER_PRODUCT)`, efConstruction "
        f"{h['efConstruction']}, every vector queried for its k={h['k']} nearest "
        "neighbours, kept when similarity ≥ t.", "",
        f"Data: `generate_corpus(n, {', '.join(f'{k}={v}' for k, v in c.items())})` (only its planted copy "
        "structure and edit rates are used) → `generate_vectors(corpus, dim=d, copy_noise=0.15, seed=0)`: copies at "
        "cosine ≈ 0.9-0.99 to their original (edit rate 0-0.2 scales the noise), same-topic strangers at ≈ 0.36.", "",
        "¹ FAISS rows: one index build + one search serves both thresholds (range search at the lower one, "
        "pairs cut per threshold), so the time is the same in both rows. Peak RSS is measured beyond the loaded "
        "vectors, after a warm-up on 300 vectors; time is wall-clock on a shared machine (CPU seconds beside it).", ""]


def _scale(results: dict) -> list[str]:
    rows = list((results.get("scales") or {}).values())
    if results.get("scale"):
        rows.insert(0, dict(results["scale"], commands=[results.get("command_scale")]))
    return [line for sc in rows for line in _scale_row(sc)]


def _scale_tool(name: str, r: dict) -> str:
    p = r["params"]
    if p.get("lsh"):
        return f"{name} (b={p['lsh'].get('bands')}, r={p['lsh'].get('rows')})"
    if "nlist" in p:
        return f"{name} (nlist={p['nlist']}, nprobe={p['nprobe']})"
    return name


def _scale_row(sc: dict) -> list[str]:
    cmds = "` then `".join(command(c, DEFAULT_COMMAND + " --scale N DIM") for c in sc.get("commands") or [None])
    L = [f"### Scale: {sc['n']:,} vectors, dim {sc['dim']}", "",
         f"Command: `{cmds}`. No all-pairs truth "
         "at this size (FAISS flat would be n²·d multiply-adds); recall is measured on the "
         "planted pairs (a copy and its original) whose exact cosine is ≥ t. `diversify components` clusters by "
         "the connected components of the verified pairs (no cut): its recall is the linking's own; under the "
         "default clique cut a copy and its original can be kept apart when another copy is below t to one "
         "of them.", ""]
    head = ["t", "tool", "time (s)", "CPU s", "vectors/s", "peak RSS beyond input", "candidates", "planted pairs ≥ t",
            "recall on them", "clusters", "load avg (1 min)"]
    rows = []
    for t, tools in sc["tools"].items():
        for name, r in tools.items():
            if "skipped" in r:
                rows.append(skipped([t, name], r["skipped"], len(head)))
                continue
            rows.append([t, _scale_tool(name, r), f"{r['timings']['total']:.1f}",
                         f"{r['cpu_s']:.1f}", num(r["vectors_per_s"]), f"{num(r['rss_delta_mb'])} MiB",
                         num(r["params"].get("candidates")), f"{r['planted_pairs_at_t']:,}",
                         f"{r['planted_recall']:.4f}", f"{r['clusters']:,}",
                         f"{r['loadavg_before'][0]:.1f} → {r['loadavg_after'][0]:.1f}"])
    return L + table(head, "ll" + "r" * 9, rows) + [""]


def _real(results: dict, th) -> list[str]:
    real = results.get("real_mrpc")
    if not real:
        return []
    L = ["### Real data: MRPC sentences embedded with all-MiniLM-L6-v2", ""]
    if "skipped" in real:
        return L + [f"Skipped: {real['skipped']}", ""]
    L.append(f"{real['n']:,} unique sentences ({real['model']}). Truth pairs: "
             + ", ".join(f"t={t}: {real['truth'][str(t)]['pairs']:,}" for t in th)
             + ". Last column: the MRPC paraphrase labels (5,801 labeled pairs; predicted positive = same "
             "cluster). Exact cosine on the labeled pairs alone: "
             + "; ".join(f"t={t}: P {m['precision']:.3f} R {m['recall']:.3f} F1 {m['f1']:.3f}"
                         for t, m in real["labeled"]["pairwise_exact_cosine"].items()) + ".")
    return L + [""] + _table(real, th, labeled=True) + [""]


def vectors_section(results: dict) -> list[str]:
    th = results.get("thresholds", [0.9, 0.95])
    L = _intro(results)
    for run in results.get("runs", []):
        L += [f"### {run['n']:,} vectors, dim {run['dim']}", "",
              "Truth pairs: " + ", ".join(f"t={t}: {run['truth'][str(t)]['pairs']:,}" for t in th) + ".", ""]
        L += _table(run, th) + [""]
    return L + _scale(results) + _real(results, th) + _notes(results)


def _notes(results: dict) -> list[str]:
    L = ["Reading the table:", "",
         "- Wall-clock times are on a shared 2-core machine at load average 2-10 (recorded per row, other people's "
         "benchmarks and tests running): a process often got a quarter to a half of the CPU it asked for, so "
         "compare **CPU seconds** between tools; wall time partly measures the neighbours.",
         "- FAISS flat 'candidates' are its range-search hits at the lower threshold, each vector's match with "
         "itself included.",
         "- FAISS flat range search is exact by construction (it *is* the truth up to float32 rounding at t), so "
         "its row is the quality ceiling; its cost is n² · d multiply-adds (BLAS), which is what LSH avoids as n grows.",
         "- diversify's SimHash banding is chosen for recall at the threshold (S-curve); pairs well above t "
         "(planted copies at ≈ 0.98) are found with probability ≈ 1, pairs just above t can be missed — that, not "
         "verification, is where its recall below 1 comes from (verification is exact cosine, so precision loss "
         "comes only from transitive closure, which every union-find row shares).",
         "- `pigeonhole=True` guarantees that every pair within the threshold's Hamming radius shares a band, at "
         "the price of radius+1 short bands: many more candidates, hence its size limit here. The guarantee is "
         "about the *estimated* cosine: a pair whose exact cosine is ≥ t but whose 256-bit signatures differ in "
         "more bits than the radius can still be missed, so its recall can stay below 1."]
    fl = (results.get("real_mrpc") or {}).get("tools", {}).get("0.9", {}).get("FAISS IndexFlatIP range search", {})
    if "scores" in fl:
        L.append(f"- On the MiniLM embeddings of MRPC, transitive closure chains sentences: at t=0.9 even the exact "
                 f"route has pair precision {fl['scores']['pairs']['precision']:.2f} (clusters contain pairs far "
                 "below t). A tool that misses a few links can then score a *higher* pair F1 than the exact one "
                 "(diversify's default at 0.95); comp. F1 — recall of the truth's components — shows the misses. "
                 "Against the paraphrase labels all routes are alike: cosine ≥ 0.9 is a near-duplicate threshold, "
                 "not a paraphrase detector.")
    sc = results.get("scale") or (results.get("scales") or {}).get("1000000x64") or {}
    for t, tools in sc.get("tools", {}).items():
        d, w = tools.get("diversify"), tools.get("diversify bucket_window=1024")
        if d and w and "planted_recall" in d and "planted_recall" in w:
            L.append(f"- At {sc['n']:,} vectors and t={t} the planted-pair recall of the default build is "
                     f"{d['planted_recall']:.3f} and {w['planted_recall']:.3f} with `bucket_window=1024`: with 20 "
                     "topics, many 14-bit SimHash band buckets hold more than 64 vectors, and the default window "
                     "(each member compared with the next 63 in the bucket, never O(m²)) then skips true pairs. "
                     "This is the price of the giant-bucket guard on dense, clustered embeddings; raise "
                     "`BuildConfig.bucket_window` (time and candidates grow) or use more bits per band.")
    L.append("- HNSW recall is capped by k (a document with more than k near-copies keeps only k of its links; union-find "
             "usually recovers them through the others) and by the graph's approximate search.")
    return L + [""]
