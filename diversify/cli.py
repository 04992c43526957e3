"""Command line: ``diversify build | add | stats | export | demo``. Run ``diversify CMD --help``."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Optional

import numpy as np

from .errors import DiversifyError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("clustering (defaults: exact stage + MinHash on word 5-shingles at Jaccard 0.8)")
    g.add_argument("--threshold", type=float, default=0.8, help="Jaccard threshold; higher -> fewer, tighter clusters (default 0.8)")
    g.add_argument("--num-perm", type=int, default=128, help="MinHash signature length; higher -> more accurate (default 128)")
    g.add_argument("--method", choices=["oph", "classic"], default="oph", help="MinHash variant (default oph: one permutation + densification)")
    g.add_argument("--shingle", choices=["word", "char"], default="word", help="shingle unit (default word)")
    g.add_argument("-k", "--k", type=int, default=5, help="shingle length in units (default 5)")
    g.add_argument("--bands", type=int, default=None, help="LSH bands (default: chosen from the threshold)")
    g.add_argument("--rows", type=int, default=None, help="LSH rows per band (give with --bands)")
    g.add_argument("--verify", choices=["estimate", "exact"], default="estimate", help="verify candidates by signature estimate or exact Jaccard")
    g.add_argument("--no-exact", action="store_true", help="skip the exact normalized-text stage")
    g.add_argument("--no-minhash", action="store_true", help="skip MinHash (vectors only)")
    g.add_argument("--simhash-threshold", type=float, default=0.95, help="cosine threshold for vectors (default 0.95)")
    g.add_argument("--simhash-bits", type=int, choices=[64, 128, 256], default=256, help="SimHash bits per family (default 256)")
    g.add_argument("--families", type=int, default=1, help="independent SimHash families (default 1)")
    g.add_argument("--pigeonhole", action="store_true", help="SimHash bands that guarantee recall within the Hamming radius")
    g.add_argument("--representative", choices=["longest", "first", "key"], default="longest", help="representative rule (default longest)")
    g.add_argument("--empty", choices=["singleton", "error"], default="singleton", help="documents with no words: own cluster, or error")
    g.add_argument("--seed", type=int, default=1, help="hash seed (part of the artifact)")
    g.add_argument("--no-incremental", action="store_true", help="do not keep signatures for `add` (smaller file)")


def _config_from_args(a):
    from .config import BuildConfig, MinHashConfig, SimHashConfig, TextConfig

    mh = None
    if not a.no_minhash:
        mh = MinHashConfig(num_perm=a.num_perm, method=a.method, threshold=a.threshold, bands=a.bands, rows=a.rows,
                           verify=a.verify)
    sh = SimHashConfig(bits=a.simhash_bits, families=a.families, threshold=a.simhash_threshold, pigeonhole=a.pigeonhole)
    return BuildConfig(seed=a.seed, exact=not a.no_exact, text=TextConfig(shingle=a.shingle, k=a.k), minhash=mh,
                       simhash=sh, representative=a.representative, empty=a.empty, incremental=not a.no_incremental)


def _add_input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="?", help="JSONL / CSV / Parquet file or a directory of text files")
    p.add_argument("--format", choices=["jsonl", "csv", "parquet", "dir"], default=None, help="input format (default: from the name)")
    p.add_argument("--id-field", default="id", help="record field holding the id (default id)")
    p.add_argument("--text-field", default="text", help="record field holding the text (default text)")
    p.add_argument("--key-field", default=None, help="numeric field for --representative key (largest wins)")
    p.add_argument("--vectors", default=None, help=".npy array (n, dim) of embeddings, aligned with the records")
    p.add_argument("--ids", dest="ids_file", default=None, help="ids file (one per line) for --vectors without text input")
    p.add_argument("--encoding-errors", choices=["strict", "replace"], default="strict", help="non-UTF-8 bytes in text files")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--chunk-size", type=int, default=16384, help="documents per processing chunk")
    p.add_argument("--stream", action="store_true",
                   help="stream the input instead of holding the texts in memory; borderline pairs are then decided "
                        "by the MinHash estimate instead of exact Jaccard")


def _streams(a):
    """(texts, ids, keys, vectors) for build/add from the CLI input arguments."""
    from .corpus.readers import read_records, read_vectors

    vectors = None
    vec_ids = None
    if a.vectors:
        vectors, vec_ids = read_vectors(a.vectors, a.ids_file)
    if a.input is None:
        if vectors is None:
            raise DiversifyError("give an INPUT file/directory, or --vectors FILE.npy (with --ids FILE). See --help.")
        return None, vec_ids, None, vectors
    if not os.path.exists(a.input):
        raise DiversifyError(f"`input` path {a.input!r} does not exist. Check the path (a file or a directory).")
    keys: Optional[list] = [] if a.key_field else None
    records = read_records(a.input, fmt=a.format, id_field=a.id_field, text_field=a.text_field, key_field=a.key_field,
                           encoding_errors=a.encoding_errors)

    if not getattr(a, "stream", False):
        # texts in memory: verify="auto" can re-read borderline documents for an exact check
        recs = list(records)
        texts = [r[1] for r in recs]
        ids = [r[0] for r in recs]
        if keys is not None:
            keys.extend(r[2] for r in recs)
        del recs
        return texts, ids, keys, vectors

    def tap(recs):
        for r in recs:
            if keys is not None:
                keys.append(r[2])
            yield r

    r1, r2 = itertools.tee(tap(records))
    texts = (r[1] for r in r1)
    ids = (r[0] for r in r2)
    return texts, ids, keys, vectors


def _parse_metadata(items: Sequence[str]) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise DiversifyError(f"`--metadata` entries must be KEY=VALUE; got {item!r}.")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def cmd_build(a) -> int:
    import diversify

    cfg = _config_from_args(a)
    t0 = time.perf_counter()
    if a.engine == "dask":
        res = _build_dask(a, cfg)
    else:
        texts, ids, keys, vectors = _streams(a)
        res = diversify.build(texts, ids=ids, vectors=vectors, config=cfg, keys=keys,
                              metadata=_parse_metadata(a.metadata), progress=not a.no_progress, chunk_size=a.chunk_size)
    res.save(a.output)
    dt = time.perf_counter() - t0
    print(res.summary())
    print(f"wrote {a.output} ({os.path.getsize(a.output):,} bytes) in {dt:.2f}s ({res.n_docs / max(dt, 1e-9):,.0f} docs/s)")
    return 0


def _build_dask(a, cfg):
    import diversify

    from .errors import require

    if a.input is None or a.vectors:
        raise DiversifyError("`--engine dask` needs an INPUT path or glob of JSONL/Parquet files and no --vectors.")
    client = None
    if a.scheduler:
        distributed = require("distributed", extra="dask", purpose="--engine dask")
        client = distributed.Client(a.scheduler)
    try:
        return diversify.build(a.input, engine="dask", client=client, config=cfg, metadata=_parse_metadata(a.metadata),
                               progress=not a.no_progress, text_field=a.text_field, id_field=a.id_field,
                               key_field=a.key_field, format=a.format)
    finally:
        if client is not None:
            client.close()


def cmd_add(a) -> int:
    import diversify

    texts, ids, keys, vectors = _streams(a)
    res = diversify.add(a.artifact, texts, ids=ids, vectors=vectors, keys=keys, progress=not a.no_progress,
                        chunk_size=a.chunk_size)
    out = a.output or a.artifact
    res.save(out)
    print(res.summary())
    print(f"wrote {out}")
    return 0


def _histogram(sizes: np.ndarray) -> list[tuple[str, int, int]]:
    bins = [(1, 1), (2, 2), (3, 5), (6, 10), (11, 100), (101, 1000), (1001, None)]
    rows = []
    for lo, hi in bins:
        m = (sizes >= lo) if hi is None else ((sizes >= lo) & (sizes <= hi))
        label = f"{lo}" if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
        rows.append((label, int(m.sum()), int(sizes[m].sum())))
    return rows


def cmd_stats(a) -> int:
    from .artifact import load

    cm = load(a.artifact)
    cids, sizes = cm.cluster_sizes()
    order = np.lexsort((cids, -sizes))[: a.top]
    info = {
        "path": a.artifact,
        "documents": cm.n_docs,
        "clusters": cm.n_clusters,
        "would_be_removed": cm.n_docs - cm.n_clusters,
        "histogram": [{"size": l, "clusters": c, "documents": d} for l, c, d in _histogram(sizes)],
        "largest": [
            {"cluster_id": int(cids[i]), "size": int(sizes[i]), "sample_ids": cm.members(int(cids[i]))[:5],
             "stages": cm.cluster_stages(int(cids[i]))}
            for i in order
        ],
        "fingerprint": cm.fingerprint,
        "seed": cm.seed,
        "hash_scheme": cm.hash_scheme,
        "created_at": cm.created_at,
        "library_version": cm.library_version,
        "config": cm.config,
        "lsh": cm.build_info.get("lsh", {}),
        "metadata": cm.metadata,
    }
    if a.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    print(f"artifact         {a.artifact}")
    print(f"documents        {info['documents']:,}")
    print(f"clusters         {info['clusters']:,}")
    print(f"would be removed {info['would_be_removed']:,} ({info['would_be_removed'] / max(1, cm.n_docs):.1%}) at max one per cluster")
    print("cluster sizes    size: clusters (documents)")
    for row in info["histogram"]:
        if row["clusters"]:
            print(f"  {row['size']:>9}: {row['clusters']:,} ({row['documents']:,})")
    print("largest clusters (stages: 1 exact, 2 minhash, 4 simhash)")
    for row in info["largest"]:
        if row["size"] < 2:
            break
        print(f"  #{row['cluster_id']:<8} size {row['size']:<6} stages {row['stages']}  e.g. {', '.join(map(str, row['sample_ids']))}")
    for name, p in info["lsh"].items():
        print(f"{name:<16} bands={p.get('bands')} rows={p.get('rows')} recall@threshold={p.get('recall_at_threshold', 0):.3f}")
    mh = cm.config.get("minhash") or {}
    print(f"params           threshold={mh.get('threshold')} num_perm={mh.get('num_perm')} method={mh.get('method')} "
          f"shingle={cm.config.get('text', {}).get('shingle')}/{cm.config.get('text', {}).get('k')} seed={cm.seed}")
    print(f"fingerprint      {cm.fingerprint}")
    print(f"built            {cm.created_at} by diversify {cm.library_version}")
    if cm.metadata:
        print(f"metadata         {cm.metadata}")
    return 0


def cmd_export(a) -> int:
    from .artifact import load
    from .corpus.export import write_export

    cm = load(a.artifact)
    n = write_export(cm, a.output, a.format)
    print(f"wrote {n:,} records to {a.output}")
    return 0


def _labels_to_bool(values, positive_min):
    out = []
    for v in values:
        if isinstance(v, bool):
            out.append(v)
            continue
        try:
            x = float(v)
        except (TypeError, ValueError):
            s = str(v).strip().lower()
            if s in ("true", "yes", "same", "dup", "duplicate"):
                out.append(True)
                continue
            if s in ("false", "no", "different", "distinct"):
                out.append(False)
                continue
            raise DiversifyError(f"`--label` values must be 0/1, true/false or numbers (with --positive-min); got {v!r}.")
        out.append(x >= positive_min if positive_min is not None else bool(x >= 0.5))
    return np.array(out, dtype=bool)


def _cluster_ids_for(a):
    """(lookup function) from an artifact, or from building --corpus with the config options."""
    import diversify

    if a.artifact:
        cm = diversify.load(a.artifact)
        return cm.lookup
    if not a.corpus:
        raise DiversifyError("`eval` needs an ARTIFACT or --corpus FILE to build from. See --help.")
    from .corpus.readers import read_records

    recs = list(read_records(a.corpus, id_field=a.id_field, text_field=a.text_field))
    res = diversify.build([r[1] for r in recs], ids=[r[0] for r in recs], config=_config_from_args(a))
    return res.cluster_map.lookup


def cmd_eval(a) -> int:
    from .corpus.readers import column, read_table
    from .evaluate import clustering_metrics, pair_metrics

    lookup = _cluster_ids_for(a)
    if bool(a.pairs) == bool(a.labels):
        raise DiversifyError("`eval` needs exactly one of --pairs FILE (id_a, id_b, label) or --labels FILE (id, label).")
    report: dict = {}
    if a.pairs:
        rows = read_table(a.pairs, _columns(a))
        ida, idb = column(rows, a.id_a, a.pairs), column(rows, a.id_b, a.pairs)
        gold = _labels_to_bool(column(rows, a.label, a.pairs), a.positive_min)
        ca, cb = lookup(_coerce_ids(ida)), lookup(_coerce_ids(idb))
        known = (ca >= 0) & (cb >= 0)
        m = pair_metrics((ca == cb)[known], gold[known])
        report = {"mode": "pairs", "pairs": len(rows), "unknown_pairs": int((~known).sum()), **m.as_dict()}
    else:
        rows = read_table(a.labels, _columns(a))
        ids = _coerce_ids(column(rows, a.id_field, a.labels))
        gold = column(rows, a.label, a.labels)
        pred = lookup(ids)
        known = pred >= 0
        gold_arr = np.array([str(g) for g in gold], dtype=object)[known]
        m = clustering_metrics(gold_arr, pred[known])
        report = {"mode": "clusters", "unknown_ids": int((~known).sum()), **m}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    for k in ("mode", "pairs", "documents", "unknown_pairs", "unknown_ids"):
        if k in report:
            print(f"{k:<12} {report[k]}")
    print(f"precision    {report['precision']:.4f}")
    print(f"recall       {report['recall']:.4f}")
    print(f"f1           {report['f1']:.4f}")
    if "ari" in report:
        print(f"ari          {report['ari']:.4f}")
    print(f"confusion    tp={report['tp']:,} fp={report['fp']:,} fn={report['fn']:,} tn={report['tn']:,}")
    return 0


def _columns(a):
    return [c.strip() for c in a.columns.split(",")] if getattr(a, "columns", None) else None


def _coerce_ids(values):
    """Ids read from CSV are strings; keep ints as ints when every value is an integer literal."""
    if all(isinstance(v, int) for v in values):
        return list(values)
    return [str(v) for v in values]


def cmd_tune(a) -> int:
    from .config import TextConfig
    from .corpus.readers import column, read_records, read_table
    from .evaluate import best_threshold, jaccard_pairs, pr_curve
    from .linking.bands import optimal_params

    rows = read_table(a.pairs, _columns(a))
    gold = _labels_to_bool(column(rows, a.label, a.pairs), a.positive_min)
    if a.corpus:
        texts = {str(r[0]): r[1] for r in read_records(a.corpus, id_field=a.id_field, text_field=a.text_field)}
        try:
            ta = [texts[str(x)] for x in column(rows, a.id_a, a.pairs)]
            tb = [texts[str(x)] for x in column(rows, a.id_b, a.pairs)]
        except KeyError as exc:
            raise DiversifyError(f"pair id {exc.args[0]!r} is not in --corpus {a.corpus}.") from None
    else:
        ta = [str(x or "") for x in column(rows, a.text_a, a.pairs)]
        tb = [str(x or "") for x in column(rows, a.text_b, a.pairs)]
    tc = TextConfig(shingle=a.shingle, k=a.k)
    scores = jaccard_pairs(ta, tb, tc)
    curve = pr_curve(scores, gold)
    best = best_threshold(curve)
    lsh = optimal_params(round(best["threshold"], 2), a.num_perm, 0.05, 0.95)
    out = {"pairs": len(rows), "positives": int(gold.sum()), "shingle": a.shingle, "k": a.k, "best": best,
           "lsh": {"num_perm": a.num_perm, **lsh.as_dict()}, "curve": curve}
    if a.plot:
        _plot_pr(curve, best, a.plot)
        out["plot"] = a.plot
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{len(rows):,} labeled pairs ({out['positives']:,} positive); similarity: exact Jaccard of {a.shingle} {a.k}-shingles")
    print("threshold  precision  recall     f1")
    for r in curve:
        if abs(r["threshold"] * 20 - round(r["threshold"] * 20)) < 1e-9 or r is best:
            mark = "  <- best F1" if r is best else ""
            print(f"{r['threshold']:>9.2f}  {r['precision']:>9.4f}  {r['recall']:>6.4f}  {r['f1']:.4f}{mark}")
    print(f"best threshold {best['threshold']:.2f}: precision {best['precision']:.4f}, recall {best['recall']:.4f}, F1 {best['f1']:.4f}")
    print(f"implies LSH bands={lsh.bands} rows={lsh.rows} for num_perm={a.num_perm} "
          f"(candidate probability at the threshold {lsh.recall_at_threshold:.3f})")
    print(f"build with: diversify build INPUT -o OUT --shingle {a.shingle} -k {a.k} --threshold {best['threshold']:.2f}")
    if a.plot:
        print(f"wrote {a.plot}")
    return 0


def _plot_pr(curve, best, path):
    from .errors import require

    require("matplotlib", extra="plot", purpose="Writing the PR plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4), dpi=120)
    ax.plot([r["recall"] for r in curve], [r["precision"] for r in curve], marker=".", lw=1)
    ax.scatter([best["recall"]], [best["precision"]], color="red", zorder=3, label=f"best F1 at t={best['threshold']:.2f}")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title("precision-recall over the threshold")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cmd_demo(a) -> int:
    from .demo import run_demo

    if a.n < 0:
        raise DiversifyError(f"`--n` must be a number of documents >= 1; got {a.n}. The default 20000 runs in seconds.")
    return run_demo(n_docs=a.n, seed=a.seed, threshold=a.threshold)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="diversify", description="Keep near-duplicate documents out of retrieval results.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"diversify {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("build", help="cluster a corpus and write the artifact", description="Cluster a corpus and write a ClusterMap artifact.")
    _add_input_args(p)
    p.add_argument("-o", "--output", required=True, help="artifact path to write (atomically)")
    p.add_argument("--metadata", nargs="*", default=[], metavar="KEY=VALUE", help="stored in the artifact, e.g. embedding_model=all-MiniLM-L6-v2")
    p.add_argument("--engine", choices=["local", "dask"], default="local", help="run on this machine (default) or on Dask")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address for --engine dask (default: a local cluster)")
    _add_config_args(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("add", help="add documents to an artifact without a rebuild", description="Add documents incrementally; existing cluster ids are kept.")
    p.add_argument("artifact", help="existing artifact (built with incremental state)")
    _add_input_args(p)
    p.add_argument("-o", "--output", default=None, help="write here instead of replacing the artifact (atomically)")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("stats", help="summarize an artifact", description="Documents, clusters, size histogram, largest clusters, params.")
    p.add_argument("artifact")
    p.add_argument("--top", type=int, default=10, help="largest clusters to list (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("export", help="write id, cluster_id, is_representative per document", description="Export one record per document (CSV, JSONL or Parquet) for a vector store's metadata.")
    p.add_argument("artifact")
    p.add_argument("-o", "--output", required=True, help="output .csv, .jsonl or .parquet")
    p.add_argument("--format", choices=["csv", "jsonl", "parquet"], default=None)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("eval", help="precision/recall/F1/ARI of a build against labels", description="Compare a build (or a build of --corpus) with labeled pairs or gold cluster labels.")
    p.add_argument("artifact", nargs="?", help="artifact to evaluate (or give --corpus to build one in memory)")
    p.add_argument("--corpus", default=None, help="JSONL/CSV/Parquet corpus to build with the clustering options below")
    p.add_argument("--pairs", default=None, help="CSV/TSV/JSONL of labeled pairs (columns --id-a, --id-b, --label)")
    p.add_argument("--labels", default=None, help="CSV/TSV/JSONL of gold cluster labels (columns --id-field, --label)")
    p.add_argument("--id-a", default="id_a")
    p.add_argument("--id-b", default="id_b")
    p.add_argument("--label", default="label", help="label column (0/1, true/false, or a score with --positive-min)")
    p.add_argument("--positive-min", type=float, default=None, help="a score >= this is a positive pair (e.g. 4 for STS-B)")
    p.add_argument("--id-field", default="id")
    p.add_argument("--text-field", default="text")
    p.add_argument("--columns", default=None, help="comma-separated column names for a CSV/TSV without a header row")
    p.add_argument("--json", action="store_true")
    _add_config_args(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("tune", help="sweep the threshold on labeled pairs and pick the F1 maximum", description="Label 200-500 pairs, then let this pick the threshold (and the LSH bands/rows it implies).")
    p.add_argument("--pairs", required=True, help="CSV/TSV/JSONL of labeled pairs: texts (--text-a/--text-b) or ids with --corpus")
    p.add_argument("--corpus", default=None, help="corpus holding the texts of --id-a/--id-b")
    p.add_argument("--text-a", default="text_a")
    p.add_argument("--text-b", default="text_b")
    p.add_argument("--id-a", default="id_a")
    p.add_argument("--id-b", default="id_b")
    p.add_argument("--id-field", default="id")
    p.add_argument("--text-field", default="text")
    p.add_argument("--label", default="label")
    p.add_argument("--positive-min", type=float, default=None, help="a score >= this is a positive pair")
    p.add_argument("--shingle", choices=["word", "char"], default="word")
    p.add_argument("-k", "--k", type=int, default=5)
    p.add_argument("--num-perm", type=int, default=128, help="for the implied LSH bands/rows")
    p.add_argument("--plot", default=None, help="write the PR curve as PNG (needs matplotlib: pip install 'diversify-retrieval[plot]')")
    p.add_argument("--columns", default=None, help="comma-separated column names for a CSV/TSV without a header row")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("demo", help="build on generated data with planted duplicates and show diversified search", description="End-to-end demo on built-in generated data; no network.")
    p.add_argument("--n", type=int, default=20000, help="documents to generate (default 20000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threshold", type=float, default=0.8)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = make_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "func", None):
        parser.print_help()
        return 2
    try:
        return a.func(a)
    except DiversifyError as exc:
        print(f"diversify {a.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        print("interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
