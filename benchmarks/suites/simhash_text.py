"""simhash_text: the PyPI ``simhash`` package and ``text-dedup`` vs diversify's MinHash build,
scored against exact Jaccard (word 5-shingles) on the generated corpus and on MRPC.

The generated corpus and its exact truth are the build suite's (``corpora.TEXT_CORPUS``);
diversify, simhash and its warm-up run in workers under the common protocol; text-dedup runs as
its own CLI process (whole-process wall time, ``/usr/bin/time -v`` peak RSS). On MRPC everything
runs in-process after a warm-up (simhash has no threshold: one run per k, scored at every t).
"""

from __future__ import annotations

import subprocess

from . import Suite

SUITE = Suite(
    name="simhash_text",
    summary="text SimHash (simhash k=3/6/10) and text-dedup MinHash vs diversify on 20k generated docs and MRPC: "
            "time, CPU s, peak RSS, pair P/R/F1 vs exact Jaccard and vs MRPC labels",
    results=("simhash_text.json",), render="benchmarks.report.simhash:simhash_section",
    peers=("simhash", "text-dedup"), data=("mrpc",), quick={"n": 2000, "ks": [3], "no_mrpc": True},
    takes="~20 min")

NUM_PERM = 128


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 6, 10],
                   help="SimhashIndex Hamming tolerances on the generated corpus (k=10 scans buckets of ~n/64 "
                        "documents in Python: it grows ~n²)")
    p.add_argument("--mrpc-ks", type=int, nargs="+", default=[3, 6, 10], help="tolerances on MRPC")
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--no-mrpc", action="store_true")


def _text_dedup(prefix: str, n: int, threshold: float, timeout: float, tag: str) -> dict:
    """text-dedup's labels and record, or {"skipped": why}."""
    from ..tools import text_dedup

    why = text_dedup.unavailable()
    if why:
        return dict(skipped=why)
    try:
        return text_dedup.run(prefix, n, threshold, timeout, tag=tag, num_perm=NUM_PERM)
    except subprocess.TimeoutExpired:
        return dict(skipped=f"timed out after {timeout:.0f}s")


def generated(n: int, ks, timeout: float, threshold: float = 0.8) -> dict:
    from ..corpora import TEXT_CORPUS, corpus_file, corpus_params
    from ..paths import log
    from ..truth import components
    from ..worker import run_job
    from ._minhash import run_tool, scores, truth_for

    prefix = corpus_file(n, TEXT_CORPUS)
    truth_pairs, tstats = truth_for(prefix, threshold)
    truth_labels = components(n, truth_pairs)
    out = dict(n=n, threshold=threshold, corpus=corpus_params(prefix), truth=tstats, tools={})
    rec, labels = run_tool(prefix, "diversify", {}, tag="diversify (MinHash)")
    rec["scores"] = scores(labels["labels"], truth_pairs, truth_labels)
    out["tools"]["diversify MinHash (verify=auto)"] = rec
    for k in ks:
        log(f"simhash k={k} on n={n:,} ...")
        r = run_job("benchmarks.tools.simhash:TASK", dict(corpus=prefix, k=k), tag=f"simhash-k{k}", timeout=timeout)
        if r is None:
            out["tools"][f"simhash k={k}"] = dict(skipped=f"timed out after {timeout:.0f}s")
            continue
        rec, lab = r
        rec["scores"] = scores(lab["labels"], truth_pairs, truth_labels)
        out["tools"][f"simhash k={k}"] = rec
    log(f"text-dedup minhash on n={n:,} ...")
    r = _text_dedup(prefix, n, threshold, timeout, tag=prefix.rsplit("/", 1)[-1])
    if "skipped" not in r:
        r = dict(r["rec"], scores=scores(r["labels"], truth_pairs, truth_labels))
    out["tools"]["text-dedup minhash"] = r
    return out


def _mrpc_scored(labels, truth, tl, a, b, y, seconds, load) -> dict:
    from ..metrics import labeled_pair_scores
    from ._minhash import scores

    return dict(vs_exact=scores(labels, truth, tl), labels=labeled_pair_scores(labels, a, b, y), seconds=seconds,
                loadavg_before=load)


def mrpc(ks, thresholds=(0.8, 0.5), timeout: float = 900) -> dict:
    from .. import data
    from ..corpora import texts_file
    from ..protocol import timed
    from ..tools.minhash import warm_up
    from ..tools.simhash import run_simhash
    from ..truth import components
    from .quality import exact_truth, in_process

    try:
        texts, a, b, y = data.pairs_corpus(data.mrpc())
    except data.DataMissing as e:
        return dict(skipped=str(e))
    n = len(texts)
    out = dict(n_docs=n, n_pairs=int(len(a)), n_positive=int(y.sum()), results={})
    warm_up("diversify")
    run_simhash(texts[:200], ks[0])
    prefix = texts_file("mrpc", texts)  # text-dedup reads a corpus file, like the generated corpora
    sim_runs = []  # simhash has no threshold: one run per k, scored at every threshold
    for k in ks:
        s, rec = timed(lambda k=k: run_simhash(texts, k))
        sim_runs.append((f"simhash k={k}", s["labels"], rec))
    for t in thresholds:
        truth = exact_truth(texts, t)
        tl = components(n, truth)
        d, rec = timed(lambda t=t: in_process("diversify", texts, t))
        res = {}
        for name, labels, rc in [("diversify MinHash (verify=auto)", d["labels"], rec), *sim_runs]:
            res[name] = _mrpc_scored(labels, truth, tl, a, b, y, rc["seconds"], rc["loadavg_before"])
        r = _text_dedup(prefix, n, t, timeout, tag="mrpc")
        res["text-dedup minhash"] = r if "skipped" in r else _mrpc_scored(
            r["labels"], truth, tl, a, b, y, r["rec"]["timings"]["total"], r["rec"]["loadavg_before"])
        out["results"][str(t)] = dict(truth_pairs=int(len(truth)), tools=res)
    return out


def run(args, ctx) -> list:
    from ..env import environment, version
    from ..paths import log, now, shown, write_json
    from ..tools import text_dedup

    payload = dict(suite="simhash_text", created=now(),
                   env=environment({"simhash": version("simhash"), "text-dedup": text_dedup.version()}),
                   num_perm=NUM_PERM, ks=list(args.ks), command=ctx.command)
    path = ctx.results / "simhash_text.json"
    payload["generated"] = generated(args.n, args.ks, args.timeout)
    write_json(path, payload)
    if not args.no_mrpc:
        log("MRPC ...")
        payload["mrpc"] = mrpc(args.mrpc_ks)
    write_json(path, payload)
    log(f"wrote {shown(path)}")
    return [path]
