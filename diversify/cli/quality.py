"""`diversify eval | tune`: how good are the clusters, and which threshold to build with."""

from __future__ import annotations

import json

import numpy as np

from ..errors import DiversifyError
from .options import config_from_args


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
            raise DiversifyError(
                f"`--label` values must be 0/1, true/false or numbers (with --positive-min); got {v!r}."
            ) from None
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
    from ..corpus.readers import read_records

    recs = list(read_records(a.corpus, id_field=a.id_field, text_field=a.text_field))
    res = diversify.build([r[1] for r in recs], ids=[r[0] for r in recs], config=config_from_args(a))
    return res.cluster_map.lookup


def cmd_eval(a) -> int:
    from ..corpus.readers import column, read_table
    from ..evaluate import clustering_metrics, pair_metrics

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
        clusters = clustering_metrics(gold_arr, pred[known])
        report = {"mode": "clusters", "unknown_ids": int((~known).sum()), **clusters}
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
    from ..corpus.readers import column, read_records, read_table
    from ..evaluate import best_threshold, jaccard_pairs, pr_curve
    from ..linking.bands import optimal_params

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
    cfg = config_from_args(a)
    tc = cfg.text
    assert cfg.minhash is not None  # the tune command has no --no-minhash flag
    a.shingle, a.k, a.num_perm = tc.shingle, tc.k, cfg.minhash.num_perm
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
    from ..errors import require

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
