"""quality: MinHash tools on real labeled data (Clough & Stevenson, MRPC, Twitter URL corpus)."""

from __future__ import annotations

import numpy as np

from ..markdown import env_line, table
from . import Suite

SUITE = Suite(
    name="quality",
    summary="real labeled data: Clough & Stevenson (share of cut/light/heavy/non answers clustered with their "
            "source), MRPC and Twitter URL (P/R/F1 vs exact Jaccard truth and vs paraphrase labels)",
    results=("quality.json",), render="benchmarks.suites.quality:quality_section",
    peers=("datasketch", "rensa"), data=("clough_stevenson_plagiarism", "mrpc", "twitter_url_corpus"),
    quick={"datasets": ["clough_stevenson"]}, takes="~3 min")

DATASETS = ("clough_stevenson", "mrpc", "twitter_url")
RUNS = (("diversify", {}), ("diversify-exact", {"verify": "exact"}), ("rensa", {}), ("datasketch", {}))


def add_arguments(p) -> None:
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)


def _sets(texts) -> list[set]:
    from ..reference import ShingleHasher

    ip, hs = ShingleHasher().hash_many(texts)
    return [set(hs[ip[i] : ip[i + 1]].tolist()) for i in range(len(texts))]


def exact_jaccard_pairs(texts, a, b) -> np.ndarray:
    sets = _sets(texts)
    return np.array([len(sets[i] & sets[j]) / max(1, len(sets[i] | sets[j])) for i, j in zip(a, b)])


def exact_truth(texts, threshold: float) -> np.ndarray:
    from ..reference import ShingleHasher
    from ..truth import similarity_join

    ip, hs = ShingleHasher().hash_many(texts)
    return similarity_join(ip, hs, threshold)[0]


def in_process(tool: str, texts, threshold: float, **kw) -> dict:
    from ..peers.minhash import RUNNERS
    from ._minhash import NUM_PERM

    return RUNNERS[tool](texts, [str(i) for i in range(len(texts))], num_perm=NUM_PERM, threshold=threshold, **kw)


def _runs(texts, threshold):
    """(name, labels) of every tool at ``threshold``, with the peers' "+ verify" variants."""
    for name, kw in RUNS:
        out = in_process(name.split("-")[0], texts, threshold, **kw)
        yield name, out["labels"]
        if "labels_verified" in out:
            yield name + " +verify", out["labels_verified"]


def clough(thresholds=(0.8, 0.5, 0.3)) -> dict:
    from ..data import clough_stevenson

    d = clough_stevenson()
    texts, cat, task = d["texts"], d["category"], d["task"]
    src_index = {t: i for i, (t, c) in enumerate(zip(task, cat)) if c == "orig"}
    ans = [i for i, c in enumerate(cat) if c != "orig"]
    j_to_src = exact_jaccard_pairs(texts, ans, [src_index[task[i]] for i in ans])
    cats = ("cut", "light", "heavy", "non")
    by_cat = {c: [j for i, j in zip(ans, j_to_src) if cat[i] == c] for c in cats}
    out = dict(n_docs=len(texts), counts={c: sum(cat[i] == c for i in ans) for c in cats},
               exact_jaccard_to_source={c: dict(mean=float(np.mean(by_cat[c])), max=float(np.max(by_cat[c])))
                                        for c in cats},
               results={})
    for t in thresholds:
        res = {"exact Jaccard": {c: float(np.mean([j >= t for j in by_cat[c]])) for c in cats}}
        for name, labels in _runs(texts, t):
            res[name] = {c: float(np.mean([labels[i] == labels[src_index[task[i]]] for i in ans if cat[i] == c]))
                         for c in cats}
        out["results"][str(t)] = res
    return out


def pair_quality(triples, thresholds=(0.8, 0.5)) -> dict:
    """Clusters of the unique sentences vs exact truth (all pairs) and vs the pair labels."""
    from ..data import pairs_corpus
    from ..metrics import labeled_pair_scores, pair_scores
    from ..truth import components

    texts, a, b, y = pairs_corpus(triples)
    out = dict(n_docs=len(texts), n_pairs=int(len(a)), n_positive=int(y.sum()), results={})
    j = exact_jaccard_pairs(texts, a, b)
    for t in thresholds:
        truth = exact_truth(texts, t)
        tl = components(len(texts), truth)
        res = {"exact Jaccard": dict(labels=labeled_pair_scores(tl, a, b, y), truth_pairs=int(len(truth)),
                                     labeled_pairs_at_threshold=float((j >= t).mean()))}
        for name, labels in _runs(texts, t):
            res[name] = dict(vs_exact=pair_scores(labels, truth), labels=labeled_pair_scores(labels, a, b, y))
        out["results"][str(t)] = res
    return out


def run(args, ctx) -> list:
    from .. import data
    from ..env import environment
    from ..paths import log, now, shown, write_json
    from ..peers.minhash import warm_up
    from ._minhash import NUM_PERM

    for tool, kw in RUNS:
        warm_up(tool.split("-")[0], **kw)
    payload = dict(suite="quality", created=now(), env=environment(), num_perm=NUM_PERM)
    loaders = {"clough_stevenson": clough, "mrpc": lambda: pair_quality(data.mrpc()),
               "twitter_url": lambda: pair_quality(data.twitter_url())}
    for name in args.datasets:
        log(f"quality: {name} ...")
        try:
            payload[name] = loaders[name]()
        except data.DataMissing as e:
            log(f"  skipped: {e}")
            payload[name] = dict(skipped=str(e))
    path = write_json(ctx.results / "quality.json", payload)
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def _clough(cs: dict) -> list[str]:
    if cs.get("skipped"):
        return [f"Clough & Stevenson: skipped ({cs['skipped']}).", ""]
    if not cs:
        return []
    cats = list(cs["counts"])
    ej = cs["exact_jaccard_to_source"]
    L = ["**Clough & Stevenson** (95 answers vs their task's Wikipedia source): share of answers put in the "
         "source's cluster, per category. Mean exact 5-shingle Jaccard to the source: "
         + ", ".join(f"{c} {ej[c]['mean']:.3f} (max {ej[c]['max']:.3f})" for c in cats) + ".", ""]
    rows = [[t, name, *(f"{per[c]:.2f}" for c in cats)] for t, res in cs["results"].items() for name, per in res.items()]
    L += table(["threshold", "method", *(f"{c} (n={cs['counts'][c]})" for c in cats)], "ll" + "r" * len(cats), rows)
    return L + [""]


def _pair_rows(q: dict):
    for t, res in q["results"].items():
        for name, r in res.items():
            lab = r["labels"]
            tail = [f"{lab['precision']:.3f}", f"{lab['recall']:.3f}", f"{lab['f1']:.3f}"]
            if name == "exact Jaccard":
                yield [t, f"exact Jaccard ({r['truth_pairs']:,} pairs ≥ t)", "1", "1", "1", *tail]
            else:
                e = r["vs_exact"]
                yield [t, name, f"{e['precision']:.3f}", f"{e['recall']:.3f}", f"{e['f1']:.3f}", *tail]


def _pairs(title: str, q: dict) -> list[str]:
    if q.get("skipped"):
        return [f"{title}: skipped ({q['skipped']}).", ""]
    if not q:
        return []
    L = [f"**{title}**: {q['n_docs']:,} unique sentences, {q['n_pairs']:,} labeled pairs "
         f"({q['n_positive']:,} paraphrases). Against exact Jaccard truth (all pairs) and against the "
         "paraphrase labels (predicted paraphrase = same cluster).", ""]
    L += table(["threshold", "method", "P vs exact", "R vs exact", "F1 vs exact", "P vs labels", "R vs labels",
                "F1 vs labels"], "llrrrrrr", _pair_rows(q))
    return L + [""]


def quality_section(d: dict) -> list[str]:
    L = ["## Quality on real labeled data", ""]
    if d.get("skipped"):
        return L + [f"Skipped: {d['skipped']}", ""]
    L += [f"Measured {d['created']} on {env_line(d['env'])}.", ""]
    L += _clough(d.get("clough_stevenson", {}))
    L += _pairs("MRPC", d.get("mrpc", {}))
    L += _pairs("Twitter URL corpus (test split, n=3 votes discarded)", d.get("twitter_url", {}))
    return L
