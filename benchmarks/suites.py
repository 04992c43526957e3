"""Benchmark suites: build (ours vs peers), scaling (ours, 10k → 1M), quality (real labeled data)."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .env import environment
from .metrics import cluster_pair_scores, labeled_pair_scores, pair_scores
from .truth import components

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results"
DATA = Path(os.environ.get("DIVERSIFY_DATA", ROOT.parent / "shared" / "data"))

NUM_PERM, THRESHOLD = 128, 0.8
# The synthetic corpus of the comparison. Edit rates spread from exact copies (J = 1) past the
# threshold (rate 0.05 → J ≈ 0.6), so the near-threshold cases are well represented.
CORPUS = dict(words_per_doc=550, dup_fraction=0.2, edit_rate=(0.0, 0.05), boilerplate_fraction=0.0,
              topics=20, seed=0)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _key(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


def corpus_file(n: int, params: dict = CORPUS) -> str:
    """Generate (once) and store a corpus as a UTF-8 blob + offsets; returns the path prefix.

    Large corpora are generated in a child process so this process does not keep their memory."""
    CACHE.mkdir(exist_ok=True)
    prefix = str(CACHE / f"corpus-{n}-{_key(params)}")
    if os.path.exists(prefix + ".npz"):
        return prefix
    if n > 50_000 and not os.environ.get("_BENCH_CORPUS_CHILD"):
        env = dict(os.environ, _BENCH_CORPUS_CHILD="1",
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        code = f"from benchmarks.suites import corpus_file; corpus_file({n}, {params!r})"
        subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd(), env=env)
        return prefix
    from diversify.corpus.datagen import generate_corpus

    t = time.perf_counter()
    c = generate_corpus(n, **params)
    gen_s = time.perf_counter() - t
    offsets = np.zeros(n + 1, dtype=np.int64)
    with open(prefix + ".bin.tmp", "wb") as f:
        for i, text in enumerate(c.texts):
            b = text.encode("utf-8")
            f.write(b)
            offsets[i + 1] = offsets[i] + len(b)
    os.replace(prefix + ".bin.tmp", prefix + ".bin")
    np.savez(prefix + ".npz", offsets=offsets, source=c.source, edit_rates=c.edit_rates,
             params=json.dumps(dict(n_docs=n, **params)), generate_s=gen_s)
    log(f"corpus n={n:,} generated in {gen_s:.1f}s ({offsets[-1] / 2**20:,.0f} MiB of UTF-8)")
    return prefix


def _run_job(job: dict, timeout: float = 3600) -> None:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"job-{_key(job)}.json"
    path.write_text(json.dumps(job))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # cwd stays the current one: under a HEAD snapshot it is what puts that `diversify` first.
    subprocess.run([sys.executable, "-m", "benchmarks.worker", str(path)], check=True, cwd=os.getcwd(), env=env,
                   timeout=timeout)


def truth_for(prefix: str, threshold: float = THRESHOLD) -> tuple[np.ndarray, dict]:
    out = f"{prefix}-truth-{threshold}.npz"
    if not os.path.exists(out):
        log(f"exact truth (threshold {threshold}) for {Path(prefix).name} ...")
        _run_job(dict(kind="truth", corpus=prefix, out=out, threshold=threshold))
    z = np.load(out)
    return z["pairs"], json.loads(str(z["stats"]))


def run_tool(prefix: str, tool: str, kwargs: dict | None = None, tag: str | None = None) -> tuple[dict, dict]:
    kwargs = dict(num_perm=NUM_PERM, threshold=THRESHOLD, **(kwargs or {}))
    out = str(CACHE / f"run-{Path(prefix).name}-{tool}-{_key(kwargs)}")
    log(f"{tag or tool} on {Path(prefix).name} ...")
    _run_job(dict(kind="tool", tool=tool, corpus=prefix, out=out, kwargs=kwargs))
    rec = json.loads(Path(out + ".json").read_text())
    labels = dict(np.load(out + ".npz"))
    return rec, labels


def _score(rec, labels, truth_pairs, truth_labels) -> dict:
    row = dict(rec)
    row["scores"] = dict(pairs=pair_scores(labels["labels"], truth_pairs),
                         components=cluster_pair_scores(labels["labels"], truth_labels))
    if "labels_verified" in labels:
        row["scores_verified"] = dict(pairs=pair_scores(labels["labels_verified"], truth_pairs),
                                      components=cluster_pair_scores(labels["labels_verified"], truth_labels))
    n = rec["n_docs"]
    t = rec["timings"]
    row["docs_per_s"] = n / t["total"]
    if "total_verified" in t:
        row["docs_per_s_verified"] = n / t["total_verified"]
    sk = t.get("sketch_incl_tokenize") or t.get("sketch")
    row["signatures_per_s"] = n / sk if sk else None
    return row


def _write(name: str, payload: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=float))
    log(f"wrote {path.relative_to(ROOT)}")
    return path


TOOL_VARIANTS = {
    "diversify": ("diversify", {}),
    "diversify-exact": ("diversify", {"verify": "exact"}),
    "rensa": ("rensa", {}),
    "datasketch": ("datasketch", {}),
}


# Giant buckets: a fifth of the corpus is pages rendered from 8 templates (500 pages each at 20k
# docs, so every template page shares LSH buckets with hundreds of others).
BOILERPLATE = dict(CORPUS, boilerplate_fraction=0.2, n_templates=8)


def suite_build(n: int = 200_000, tools=("diversify", "diversify-exact", "rensa", "datasketch"),
                params: dict = CORPUS, suite: str = "build") -> Path:
    prefix = corpus_file(n, params)
    truth_pairs, truth_stats = truth_for(prefix)
    truth_labels = components(n, truth_pairs)
    rows = {}
    for name in tools:
        tool, kw = TOOL_VARIANTS[name]
        rec, labels = run_tool(prefix, tool, kw, tag=name)
        rows[name] = _score(rec, labels, truth_pairs, truth_labels)
        r = rows[name]
        log(f"  {name}: {r['docs_per_s']:,.0f} docs/s, RSS +{r['rss_delta_mb']:,.0f} MiB, "
            f"pair F1 {r['scores']['pairs']['f1']:.4f}")
    meta = np.load(prefix + ".npz")
    return _write(f"{suite}-n{n}", dict(suite=suite, created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                      env=environment(), corpus=json.loads(str(meta["params"])),
                                      num_perm=NUM_PERM, threshold=THRESHOLD, truth=truth_stats, tools=rows))


def suite_scaling(ns=(10_000, 100_000, 1_000_000), truth_max: int = 200_000) -> Path:
    rows = []
    for n in ns:
        prefix = corpus_file(n)
        rec, labels = run_tool(prefix, "diversify", {})
        row = dict(rec)
        row["docs_per_s"] = n / rec["timings"]["total"]
        if n <= truth_max:
            tp, tstats = truth_for(prefix)
            row["scores"] = dict(pairs=pair_scores(labels["labels"], tp),
                                 components=cluster_pair_scores(labels["labels"], components(n, tp)))
        rows.append(row)
        log(f"  n={n:,}: {rec['timings']['total']:.1f}s, RSS +{rec['rss_delta_mb']:,.0f} MiB")
        del labels
    return _write("scaling", dict(suite="scaling", created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                  env=environment(), corpus=dict(CORPUS), rows=rows))


# ---------------------------------------------------------------- quality on real data

def _in_process(tool: str, texts, threshold: float, **kw) -> dict:
    from .tools import RUNNERS

    return RUNNERS[tool](texts, [str(i) for i in range(len(texts))], num_perm=NUM_PERM, threshold=threshold, **kw)


def _exact_truth(texts, threshold):
    from .reference import ShingleHasher
    from .truth import similarity_join

    ip, hs = ShingleHasher().hash_many(texts)
    pairs, jac, _ = similarity_join(ip, hs, threshold)
    return pairs


def _exact_jaccard_pairs(texts, a, b) -> np.ndarray:
    from .reference import ShingleHasher

    ip, hs = ShingleHasher().hash_many(texts)
    sets = [set(hs[ip[i] : ip[i + 1]].tolist()) for i in range(len(texts))]
    return np.array([len(sets[i] & sets[j]) / max(1, len(sets[i] | sets[j])) for i, j in zip(a, b)])


QUALITY_RUNS = [("diversify", {}), ("diversify-exact", {"verify": "exact"}), ("rensa", {}), ("datasketch", {})]


def _runs(texts, threshold):
    for name, kw in QUALITY_RUNS:
        tool = name.split("-")[0]
        out = _in_process(tool, texts, threshold, **kw)
        yield name, out["labels"], None
        if "labels_verified" in out:
            yield name + " +verify", out["labels_verified"], None


def quality_clough(thresholds=(0.8, 0.5, 0.3)) -> dict:
    folder = DATA / "clough_stevenson_plagiarism"
    if not folder.is_dir():
        return dict(skipped=f"{folder} not found")
    rows = list(csv.DictReader(open(folder / "file_information.csv", encoding="utf-8")))
    files = [r["File"] for r in rows]
    texts = [(folder / f).read_text(encoding="utf-8", errors="replace") for f in files]
    cat = [r["Category"] for r in rows]
    task = [r["Task"] for r in rows]
    src_index = {t: i for i, (t, c) in enumerate(zip(task, cat)) if c == "orig"}
    ans = [i for i, c in enumerate(cat) if c != "orig"]
    j_to_src = _exact_jaccard_pairs(texts, ans, [src_index[task[i]] for i in ans])
    cats = ("cut", "light", "heavy", "non")
    out = dict(n_docs=len(texts), counts={c: sum(cat[i] == c for i in ans) for c in cats},
               exact_jaccard_to_source={c: dict(mean=float(np.mean([j for i, j in zip(ans, j_to_src) if cat[i] == c])),
                                                max=float(np.max([j for i, j in zip(ans, j_to_src) if cat[i] == c])))
                                        for c in cats},
               results={})
    for t in thresholds:
        res = {"exact Jaccard": {c: float(np.mean([j >= t for i, j in zip(ans, j_to_src) if cat[i] == c])) for c in cats}}
        for name, labels, _ in _runs(texts, t):
            res[name] = {c: float(np.mean([labels[i] == labels[src_index[task[i]]] for i in ans if cat[i] == c]))
                         for c in cats}
        out["results"][str(t)] = res
    return out


def _pairs_corpus(pairs_text):
    """Unique sentences and index pairs from (s1, s2, label) triples."""
    index: dict[str, int] = {}
    a, b, y = [], [], []
    for s1, s2, lab in pairs_text:
        a.append(index.setdefault(s1, len(index)))
        b.append(index.setdefault(s2, len(index)))
        y.append(lab)
    return list(index), np.array(a), np.array(b), np.array(y, dtype=bool)


def _pair_quality(texts, a, b, y, thresholds) -> dict:
    out = dict(n_docs=len(texts), n_pairs=int(len(a)), n_positive=int(y.sum()), results={})
    j = _exact_jaccard_pairs(texts, a, b)
    for t in thresholds:
        truth = _exact_truth(texts, t)
        tl = components(len(texts), truth)
        res = {"exact Jaccard": dict(labels=labeled_pair_scores(tl, a, b, y), truth_pairs=int(len(truth)),
                                     labeled_pairs_at_threshold=float((j >= t).mean()))}
        for name, labels, _ in _runs(texts, t):
            res[name] = dict(vs_exact=pair_scores(labels, truth), labels=labeled_pair_scores(labels, a, b, y))
        out["results"][str(t)] = res
    return out


def quality_mrpc(thresholds=(0.8, 0.5)) -> dict:
    folder = DATA / "mrpc"
    if not folder.is_dir():
        return dict(skipped=f"{folder} not found")
    triples = []
    for name in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"):
        with open(folder / name, encoding="utf-8-sig") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 5 and parts[0] in ("0", "1"):
                    triples.append((parts[3], parts[4], parts[0] == "1"))
    texts, a, b, y = _pairs_corpus(triples)
    return _pair_quality(texts, a, b, y, thresholds)


def quality_twitter(thresholds=(0.8, 0.5)) -> dict:
    path = DATA / "twitter_url_corpus" / "Twitter_URL_Corpus_test.txt"
    if not path.exists():
        return dict(skipped=f"{path} not found")
    triples = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            votes = int(parts[2].strip("()").split(",")[0])
            if votes == 3:
                continue
            triples.append((parts[0].strip(), parts[1].strip(), votes >= 4))
    texts, a, b, y = _pairs_corpus(triples)
    return _pair_quality(texts, a, b, y, thresholds)


def suite_quality() -> Path:
    from .tools import warm_up

    for tool in ("diversify", "rensa", "datasketch"):
        warm_up(tool)
    warm_up("diversify", verify="exact")
    if not DATA.is_dir():
        msg = f"real-data quality suite skipped: {DATA} not found (set DIVERSIFY_DATA to the shared data folder)"
        log(msg)
        return _write("quality", dict(suite="quality", skipped=msg))
    payload = dict(suite="quality", created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), env=environment(),
                   num_perm=NUM_PERM)
    for name, fn in (("clough_stevenson", quality_clough), ("mrpc", quality_mrpc), ("twitter_url", quality_twitter)):
        log(f"quality: {name} ...")
        payload[name] = fn()
    return _write("quality", payload)


def suite_boilerplate(n: int = 20_000, tools=("diversify", "diversify-exact", "rensa", "datasketch")) -> Path:
    return suite_build(n, tools, params=BOILERPLATE, suite="boilerplate")


SUITES = {"build": suite_build, "boilerplate": suite_boilerplate, "scaling": suite_scaling, "quality": suite_quality}
