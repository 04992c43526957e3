"""`diversify eval | tune`: how good are the clusters, and which threshold to build with."""

from __future__ import annotations

import json
import math
import os
from typing import Optional

import numpy as np

from ..errors import DiversifyError, InputError
from ..files import atomic_replace, check_output_path
from .failures import writing
from .options import config_from_args
from .output import say, warn_line


def _labels_to_bool(values, positive_min):
    if positive_min is not None and not math.isfinite(positive_min):
        raise DiversifyError(f"`--positive-min` must be a finite number (e.g. 4 for STS-B scores); got {positive_min}.")
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


def _cluster_map_for(a):
    """(cluster map, {id: text} or None): the artifact, or a build of --corpus with the config options."""
    import diversify

    from ..corpus.readers import read_records

    texts = None
    if a.corpus:
        texts = {r[0]: r[1] for r in read_records(a.corpus, id_field=a.id_field, text_field=a.text_field)}
        if not texts:
            raise DiversifyError(f"`--corpus` {a.corpus!r} holds no records. Pass the corpus the pairs or labels "
                                 "were drawn from.")
    if a.artifact:
        return diversify.load(a.artifact), texts
    if texts is None:
        raise DiversifyError("`eval` needs an ARTIFACT or --corpus FILE to build from. See --help.")
    res = diversify.build(list(texts.values()), ids=list(texts), config=config_from_args(a))
    return res.cluster_map, texts


def fold_fidelity(cm, texts: dict) -> dict:
    """Share of folded documents whose exact Jaccard to their representative is >= the threshold."""
    from ..config import TextConfig
    from ..evaluate import jaccard_pairs

    ids = cm.ids.tolist() if isinstance(cm.ids, np.ndarray) else list(cm.ids)
    cids = np.asarray(cm.cluster_ids)
    rep = np.asarray(cm.is_representative, dtype=bool)
    rep_of = dict(zip(cids[rep].tolist(), np.flatnonzero(rep).tolist()))
    members = [i for i in np.flatnonzero(~rep).tolist() if ids[i] in texts and ids[rep_of[int(cids[i])]] in texts]
    t = (cm.config.get("minhash") or {}).get("threshold")
    if not members or t is None:
        return {"folded_checked": len(members)}
    tc = TextConfig(**cm.config.get("text", {}))
    sims = jaccard_pairs([texts[ids[rep_of[int(cids[i])]]] for i in members], [texts[ids[i]] for i in members], tc)
    return {"folded_checked": len(members), "fold_fidelity": float((sims >= t - 1e-12).mean()),
            "fold_min_similarity": float(sims.min()), "threshold": t}


def cmd_eval(a) -> int:
    from ..corpus.tables import column, read_table
    from ..evaluate import clustering_metrics, pair_metrics

    if bool(a.pairs) == bool(a.labels):
        raise DiversifyError("`eval` needs exactly one of --pairs FILE (id_a, id_b, label) or --labels FILE (id, label).")
    cm, texts = _cluster_map_for(a)
    lookup = cm.lookup
    report: dict = {}
    if a.pairs:
        rows = read_table(a.pairs, _columns(a), delimiter=_delimiter(a))
        ida, idb = column(rows, a.id_a, a.pairs, "--id-a"), column(rows, a.id_b, a.pairs, "--id-b")
        gold = _labels_to_bool(column(rows, a.label, a.pairs, "--label"), a.positive_min)
        ca, cb = lookup(_coerce_ids(ida)), lookup(_coerce_ids(idb))
        known = (ca >= 0) & (cb >= 0)
        m = pair_metrics((ca == cb)[known], gold[known])
        report = {"mode": "pairs", "pairs": len(rows), "unknown_pairs": int((~known).sum()), **m.as_dict()}
    else:
        rows = read_table(a.labels, _columns(a), delimiter=_delimiter(a), param="--labels")
        ids = _coerce_ids(column(rows, a.id_field or "id", a.labels, "--id-field"))
        gold = column(rows, a.label, a.labels, "--label")
        pred = lookup(ids)
        known = pred >= 0
        gold_arr = np.array([str(g) for g in gold], dtype=object)[known]
        clusters = clustering_metrics(gold_arr, pred[known])
        report = {"mode": "clusters", "unknown_ids": int((~known).sum()), **clusters}
    if texts is not None:
        report.update(fold_fidelity(cm, texts))
    if a.json:
        say(json.dumps(report, indent=2))
        return 0
    for k in ("mode", "pairs", "documents", "unknown_pairs", "unknown_ids"):
        if k in report:
            say(f"{k:<12} {report[k]}")
    say(f"precision    {report['precision']:.4f}")
    say(f"recall       {report['recall']:.4f}")
    say(f"f1           {report['f1']:.4f}")
    if "ari" in report:
        say(f"ari          {report['ari']:.4f}")
    say(f"confusion    tp={report['tp']:,} fp={report['fp']:,} fn={report['fn']:,} tn={report['tn']:,}")
    if "fold_fidelity" in report:
        say(f"fold fidelity {report['fold_fidelity']:.4f} of {report['folded_checked']:,} folded documents are exact "
            f">= {report['threshold']} similar to their representative (min {report['fold_min_similarity']:.3f})")
    return 0


def _columns(a):
    return [c.strip() for c in a.columns.split(",")] if getattr(a, "columns", None) else None


def _coerce_ids(values):
    """Ids read from CSV are strings; keep ints as ints when every value is an integer literal."""
    if all(isinstance(v, int) for v in values):
        return list(values)
    return [str(v) for v in values]


def _tune_scores(a, rows) -> tuple[np.ndarray, str, Optional[list], Optional[np.ndarray]]:
    """(similarity per labeled pair, what it is, corpus texts or None, --vectors or None) for `tune`."""
    from ..corpus.readers import read_records
    from ..corpus.tables import column, read_vectors
    from ..evaluate import cosine_pairs, jaccard_pairs
    from ..sketches.simhash import normalize_vectors

    cfg = config_from_args(a)
    texts = None
    if a.corpus:
        recs = list(read_records(a.corpus, id_field=a.id_field, text_field=a.text_field))
        pos = {str(r[0]): i for i, r in enumerate(recs)}
        texts = [r[1] for r in recs]
        try:
            ia = [pos[str(x)] for x in column(rows, a.id_a, a.pairs, "--id-a")]
            ib = [pos[str(x)] for x in column(rows, a.id_b, a.pairs, "--id-b")]
        except KeyError as exc:
            raise DiversifyError(f"pair id {exc.args[0]!r} is not in --corpus {a.corpus}.") from None
    if a.vectors:
        if not a.corpus:
            raise DiversifyError("`--vectors` needs --corpus: the vectors' rows align with its records (ids).")
        vecs, _ = read_vectors(a.vectors)
        assert texts is not None
        vecs = normalize_vectors(vecs, name="--vectors")  # real, finite, nonzero, 2-D (as a build checks them)
        if len(vecs) != len(texts):
            raise DiversifyError(f"`--vectors` must have one row per --corpus record ({len(texts)}); "
                                 f"got {len(vecs)} rows.")
        return cosine_pairs(vecs[ia], vecs[ib]), "cosine of the vectors", texts, vecs
    if texts is not None:
        ta, tb = [texts[i] for i in ia], [texts[i] for i in ib]
    else:
        ta = [str(x) for x in column(rows, a.text_a, a.pairs, "--text-a")]
        tb = [str(x) for x in column(rows, a.text_b, a.pairs, "--text-b")]
    what = f"exact Jaccard of {cfg.text.shingle} {cfg.text.k}-shingles"
    return jaccard_pairs(ta, tb, cfg.text), what, texts, None


def _config_at(a, threshold: float, vectors: bool):
    """The config the recommended build uses: the flags as given, the tuned threshold in place
    (the MinHash Jaccard threshold, or with --vectors the SimHash cosine threshold)."""
    cfg = config_from_args(a)
    stage = "simhash" if vectors else "minhash"
    sub = getattr(cfg, stage)
    assert sub is not None  # tune has no flag that turns a stage off
    return cfg.model_copy(update={stage: sub.model_copy(update={"threshold": threshold})})


def _folded_share_at(a, texts: list, threshold: float, vectors: Optional[np.ndarray] = None) -> float:
    """Share of the corpus the recommended build (``build with:``) folds at ``threshold``."""
    import warnings

    import diversify

    from ..errors import DiversifyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiversifyWarning)
        res = diversify.build(texts, vectors=vectors, config=_config_at(a, threshold, vectors is not None))
    return res.n_duplicates / max(1, res.n_docs)


def _band_settings(a, threshold: float, vectors: bool) -> tuple[dict, str]:
    """(the LSH settings the tuned threshold implies, as JSON; the sentence that states them): the
    SimHash bands of a --vectors build, else the MinHash bands."""
    from ..linking.keys import minhash_params, simhash_params

    cfg = _config_at(a, threshold, vectors)
    if vectors:
        sc = cfg.simhash
        assert sc is not None
        p = simhash_params(cfg)
        return ({"stage": "simhash", "bits": sc.bits, "families": sc.families, **p.as_dict()},
                f"implies SimHash bands={p.bands} rows={p.rows} per family for bits={sc.bits} families={sc.families} "
                f"(a family's candidate probability at the threshold {p.recall_at_threshold:.3f})")
    assert cfg.minhash is not None
    p = minhash_params(cfg)
    return ({"stage": "minhash", "num_perm": cfg.minhash.num_perm, **p.as_dict()},
            f"implies LSH bands={p.bands} rows={p.rows} for num_perm={cfg.minhash.num_perm} "
            f"(candidate probability at the threshold {p.recall_at_threshold:.3f})")


def cmd_tune(a) -> int:
    from ..corpus.tables import column, read_table
    from ..evaluate import DEFAULT_GRID, all_positive_baseline, best_threshold, check_labels, pr_curve, tune_notes

    if a.plot:  # before the sweep, not after
        check_output_path(a.plot, param="--plot", what="the plot",
                          inputs=(("--pairs", a.pairs), ("--corpus", a.corpus), ("--vectors", a.vectors)))
        _check_plot_path(a.plot)
    rows = read_table(a.pairs, _columns(a), delimiter=_delimiter(a))
    gold = _labels_to_bool(column(rows, a.label, a.pairs, "--label"), a.positive_min)
    notes = check_labels(gold)
    scores, what, texts, vecs = _tune_scores(a, rows)
    curve = pr_curve(scores, gold)
    best = best_threshold(curve)
    baseline = all_positive_baseline(gold)
    t = round(best["threshold"], 2)
    lsh, lsh_line = _band_settings(a, t, vecs is not None)
    out = {"pairs": len(rows), "positives": int(gold.sum()), "similarity": what, "best": best,
           "baseline_all_positive": baseline, "lsh": lsh, "curve": curve}
    notes += tune_notes(best, baseline, DEFAULT_GRID.tolist())
    if texts is not None:
        share = _folded_share_at(a, texts, t, vecs)
        out["corpus_folded_share"] = share
        if share > 0.5:
            flag = f"--simhash-threshold {t:.2f} with --vectors" if vecs is not None else f"threshold {t:.2f}"
            notes.append(f"a build of --corpus at {flag} folds {share:.0%} of its documents: most of the corpus "
                         "would be hidden; check the labels or choose a higher threshold")
    if best["plateau"][0] != best["plateau"][1]:
        notes.append(f"F1 is flat at {best['f1']:.4f} from {best['plateau'][0]:.2f} to {best['plateau'][1]:.2f}: "
                     f"the labels do not pin the threshold down; {t:.2f} is the middle")
    out["warnings"] = notes
    if a.plot:
        _plot_pr(curve, best, a.plot)
        out["plot"] = a.plot
    if a.json:
        say(json.dumps(out, indent=2))
        return 0
    _print_tune(out, curve, best, lsh_line, a)
    for note in notes:
        warn_line("diversify tune", note)
    return 0


def _print_tune(out, curve, best, lsh_line: str, a) -> None:
    say(f"{out['pairs']:,} labeled pairs ({out['positives']:,} positive); similarity: {out['similarity']}")
    say("threshold  precision  recall     f1")
    for r in curve:
        if abs(r["threshold"] * 20 - round(r["threshold"] * 20)) < 1e-9 or r["threshold"] == best["threshold"]:
            mark = "  <- best F1" if r["threshold"] == best["threshold"] else ""
            say(f"{r['threshold']:>9.2f}  {r['precision']:>9.4f}  {r['recall']:>6.4f}  {r['f1']:.4f}{mark}")
    say(f"best threshold {best['threshold']:.2f}: precision {best['precision']:.4f}, recall {best['recall']:.4f}, "
        f"F1 {best['f1']:.4f}")
    base = out["baseline_all_positive"]
    say(f"baseline (every pair called a duplicate): precision {base['precision']:.4f}, recall {base['recall']:.4f}, "
        f"F1 {base['f1']:.4f}")
    if "corpus_folded_share" in out:
        say(f"a build of --corpus at {best['threshold']:.2f} folds {out['corpus_folded_share']:.1%} of its documents")
    say(lsh_line)
    if a.vectors:
        lsh = out["lsh"]
        say(f"build with: diversify build INPUT -o OUT --vectors {a.vectors} --simhash-threshold "
            f"{best['threshold']:.2f} --simhash-bits {lsh['bits']} --families {lsh['families']}")
    else:
        cfg = config_from_args(a)
        say(f"build with: diversify build INPUT -o OUT --shingle {cfg.text.shingle} -k {cfg.text.k} "
            f"--threshold {best['threshold']:.2f}")
    if a.plot:
        say(f"wrote {a.plot}")


def _delimiter(a):
    d = getattr(a, "delimiter", None)
    return "\t" if d in ("\\t", "tab", "TAB") else d


def _check_plot_path(path: str) -> None:
    """Refuse a --plot path that cannot be written before the sweep runs (the PNG is written last)."""
    from ..errors import require

    if not path.lower().endswith(".png"):
        raise DiversifyError(f"`--plot` writes a PNG image; its path must end in .png; got {path!r}.")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise DiversifyError(f"cannot write the plot to `--plot` {path!r}: the directory {directory!r} does not "
                             "exist. Create it first (e.g. mkdir -p) or choose another path.")
    require("matplotlib", extra="plot", purpose="Writing the PR plot")


def _plot_pr(curve, best, path):
    import matplotlib


    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fmt = os.path.splitext(path)[1][1:].lower() or "png"
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
    try:
        supported = fig.canvas.get_supported_filetypes()
        if fmt not in supported:
            raise InputError(f"`--plot` {path!r}: the extension .{fmt} is not an image format matplotlib writes; use "
                             f"one of {', '.join('.' + k for k in sorted(supported))} (e.g. .png).")
        with writing(path), atomic_replace(path, what="the plot", param="--plot") as f:
            fig.savefig(f, format=fmt)
    finally:
        plt.close(fig)
