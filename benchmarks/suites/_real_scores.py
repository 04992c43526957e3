"""The quality_real suite's measurements: ``diversify build`` against exact truth and peers.

For each corpus (``_real_corpora``) it

1. computes (or loads from cache) the exact pairs with Jaccard >= t (:mod:`benchmarks.truth`);
2. runs ``python -m diversify build corpus.jsonl -o x.dvf --no-progress`` (default clustering,
   ``guaranteed``) and the same with ``--clustering components``, each as a timed subprocess with
   the measured library (the harness's export of ``--ref``, or the working tree) first on
   ``PYTHONPATH``, and reads each artifact with ``diversify.load``;
3. runs rensa and datasketch (:mod:`benchmarks.peers.real`) in timed subprocesses on the same shingles;
4. scores every clustering against the truth.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .. import truth as truthmod
from ..paths import ROOT

FLAGS = {"diversify": [], "diversify-components": ["--clustering", "components"],
         "diversify-verify-exact": ["--verify", "exact"], "diversify-verify-estimate": ["--verify", "estimate"]}
# the borderline band of verify="auto", in standard errors (the default is 2): `--methods diversify-borderline-1 ...`
for _b in ("0", "1", "3", "4"):
    FLAGS[f"diversify-borderline-{_b}"] = ["--borderline", _b]
#: the methods a default run of the suite measures (the others in FLAGS are sweep settings)
METHODS = ("diversify", "diversify-components", "diversify-verify-exact", "rensa", "datasketch")
SWEEP = tuple(m for m in FLAGS if m not in METHODS)
T = 0.8


# ----------------------------------------------------------------------------- processes


def _library_root() -> Path:
    """The folder holding the measured ``diversify`` (the harness's export, or the working tree)."""
    import diversify

    return Path(diversify.__file__).resolve().parents[1]


def _library_digest() -> str:
    """SHA-256 over the library's source files (the worktree may change under a long run)."""
    h = hashlib.sha256()
    lib = _library_root()
    for p in sorted((lib / "diversify").rglob("*.py")):
        h.update(str(p.relative_to(lib)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


TIME_BIN = "/usr/bin/time"


def _timed(cmd: list[str], log: Path) -> dict:
    """Run one process; its wall seconds, CPU seconds and peak RSS.

    CPU and peak RSS come from GNU time when it is installed: rusage from os.wait4 would report the
    parent's RSS (a forked child keeps its pre-exec high-water mark).
    """
    lib = _library_root()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys([str(lib), str(ROOT)])))
    load_before = os.getloadavg()
    stat = log.with_suffix(".time")
    full = [TIME_BIN, "-f", "%e %U %S %M", "-o", str(stat), *cmd] if os.access(TIME_BIN, os.X_OK) else cmd
    with open(log, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.run(full, cwd=lib, env=env, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}; see {log}:\n{log.read_text()[-2000:]}")
    info = {"cmd": " ".join(cmd), "wall_seconds": round(wall, 2), "cpu_seconds": None, "peak_rss_mb": None,
            "loadavg_before": [round(x, 2) for x in load_before]}
    if full is not cmd:
        _, user, system, rss_kb = stat.read_text().split()[-4:]
        info.update(cpu_seconds=round(float(user) + float(system), 2), peak_rss_mb=round(int(rss_kb) / 1024, 1))
    info["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return info


def _repeat(fn, repeat: int):
    """Run fn() `repeat` times; keep the last result, report every wall time and the median run's."""
    runs = [fn() for _ in range(repeat)]
    walls = [r[-1]["wall_seconds"] for r in runs]
    med = sorted(range(repeat), key=lambda k: walls[k])[(repeat - 1) // 2]
    last = runs[-1]
    info = dict(last[-1])
    info.update(wall_seconds=walls[med], cpu_seconds=runs[med][-1]["cpu_seconds"], wall_seconds_all=walls,
                cpu_seconds_all=[r[-1]["cpu_seconds"] for r in runs])
    same = all(all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(r[:-1], last[:-1])) for r in runs)
    info["identical_across_repeats"] = same
    return (*last[:-1], info)


def run_diversify(corpus: Path, out_dir: Path, method: str) -> tuple[list, np.ndarray, np.ndarray, dict]:
    import diversify

    tag = method
    art = out_dir / f"{corpus.stem}.{tag}.dvf"
    cmd = [sys.executable, "-m", "diversify", "build", str(corpus), "-o", str(art), "--no-progress", *FLAGS[method]]
    src_before = _library_digest()
    info = _timed(cmd, out_dir / f"{corpus.stem}.{tag}.log")
    info["library_source_sha256"] = src_before
    if _library_digest() != src_before:
        info["warning"] = "the library's source changed during this run"
    cm = diversify.load(art)
    ids = list(cm.ids)
    info["artifact_bytes"] = art.stat().st_size
    info["stdout_tail"] = (out_dir / f"{corpus.stem}.{tag}.log").read_text()[-1500:]
    return ids, np.asarray(cm.cluster_ids), np.asarray(cm.is_representative, dtype=bool), info


def run_peer(tool: str, corpus: Path, out_dir: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    prefix = out_dir / f"{corpus.stem}.{tool}"
    cmd = [sys.executable, "-m", "benchmarks.peers.real", tool, str(corpus), str(prefix)]
    info = _timed(cmd, out_dir / f"{corpus.stem}.{tool}.log")
    info.update(json.loads(prefix.with_suffix(".json").read_text()))
    with np.load(prefix.with_suffix(".npz")) as z:
        labels, edges = z["labels"], z["edges"]
    return labels, edges, info


# ----------------------------------------------------------------------------- scoring


def _components(n: int, pi: np.ndarray, pj: np.ndarray) -> np.ndarray:
    """Connected-component label (smallest member) of each document in the truth graph."""
    return truthmod.components(n, np.stack([pi, pj], axis=1))


def _pairs_in(labels: np.ndarray) -> int:
    _, counts = np.unique(labels, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def _longest_rep(labels: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """For peers (which have no representative): the longest text of each cluster, ties by position."""
    order = np.lexsort((np.arange(labels.size), -lengths, labels))
    first = np.ones(labels.size, dtype=bool)
    first[1:] = labels[order][1:] != labels[order][:-1]
    rep = np.zeros(labels.size, dtype=bool)
    rep[order[first]] = True
    return rep


def score(labels: np.ndarray, rep: np.ndarray, truth: truthmod.Truth, comps: np.ndarray) -> dict:
    n = labels.size
    cids, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    rep_of = np.full(cids.size, -1)
    rep_of[inverse[rep]] = np.flatnonzero(rep)
    assert (rep_of >= 0).all() and rep.sum() == cids.size, "one representative per cluster"
    num, den = 4, 5  # t = 0.8 exactly, integer arithmetic
    assert abs(num / den - truth.meta["t"]) < 1e-12
    # fold fidelity: every folded document against its own representative, exactly
    folded = np.flatnonzero(~rep)
    below, js, empty_folds = [], [], 0
    for i in folded.tolist():
        r = int(rep_of[inverse[i]])
        a, b = truth.doc(i), truth.doc(r)
        if a.size == 0 and b.size == 0:
            empty_folds += 1
            continue
        inter = np.intersect1d(a, b, assume_unique=True).size
        union = a.size + b.size - inter
        js.append(inter / union)
        if den * inter < num * union:
            below.append((inter / union, truth.ids[i], truth.ids[r], i, r))
    below.sort()
    # pairs
    same = labels[truth.pi] == labels[truth.pj]
    co_pairs = _pairs_in(labels)
    true_co = int(same.sum())
    # against the exact connected components of the truth graph (contingency of pairs)
    key = inverse.astype(np.int64) * (n + 1) + comps
    _, cell = np.unique(key, return_counts=True)
    both = int((cell * (cell - 1) // 2).sum())
    truth_co = _pairs_in(comps)
    p = both / co_pairs if co_pairs else 1.0
    r = both / truth_co if truth_co else 1.0
    nonsingle = counts[counts > 1]
    return {
        "docs": n,
        "clusters": int(cids.size),
        "clusters_with_copies": int(nonsingle.size),
        "largest_cluster": int(counts.max()) if n else 0,
        "folded": int(folded.size),
        "folded_share": folded.size / n if n else 0.0,
        "fold_fidelity": (len(js) - len(below)) / len(js) if js else None,
        "fold_min_jaccard": min(js) if js else None,
        "fold_median_jaccard": float(np.median(js)) if js else None,
        "folds_below_t": len(below),
        "folds_of_empty_docs": empty_folds,
        "worst_folds": [{"jaccard": round(j, 4), "doc": d, "representative": rr} for j, d, rr, _, _ in below[:8]],
        "_below_pairs": [(i, rr) for _, _, _, i, rr in below[:50]],
        "true_pairs": int(truth.pi.size),
        "true_pairs_co_clustered": true_co,
        "true_pair_recall": true_co / truth.pi.size if truth.pi.size else 1.0,
        "co_clustered_pairs": co_pairs,
        "pair_precision": true_co / co_pairs if co_pairs else 1.0,
        "components_precision": p,
        "components_recall": r,
        "components_f1": 2 * p * r / (p + r) if p + r else 0.0,
    }


def edge_scores(edges: np.ndarray, truth: truthmod.Truth) -> dict:
    """A peer's accepted LSH edges (estimate >= t) against the exact pairs, before components chain them."""
    n = truth.n
    got = edges[:, 0] * n + edges[:, 1]
    want = truth.pi * n + truth.pj
    hit = int(np.isin(got, want).sum())
    return {"edges_accepted": int(got.size), "edge_precision": hit / got.size if got.size else 1.0,
            "edge_recall": hit / want.size if want.size else 1.0}


def clough_categories(labels: np.ndarray, truth: truthmod.Truth, labels_file: Path) -> dict | None:
    """Share of each human category clustered with its task's Wikipedia source."""
    if not labels_file.exists():
        return None
    info = json.loads(labels_file.read_text())
    pos = {d: k for k, d in enumerate(truth.ids)}
    out: dict[str, list[int]] = {}
    for name, lab in info.items():
        if lab["category"] == "orig":
            continue
        src = pos.get(f"orig_task{lab['task']}.txt")
        hit = int(labels[pos[name]] == labels[src]) if src is not None else 0
        out.setdefault(lab["category"], [0, 0])
        out[lab["category"]][0] += hit
        out[lab["category"]][1] += 1
    return {c: f"{h}/{n}" for c, (h, n) in sorted(out.items())}


# ----------------------------------------------------------------------------- driver


def environment() -> dict:
    def ver(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    import diversify

    head = os.environ.get("DIVERSIFY_BENCH_LIB") or subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = [] if os.environ.get("DIVERSIFY_BENCH_LIB") else subprocess.run(
        ["git", "-C", str(ROOT), "status", "--short", "--", "diversify"], capture_output=True, text=True).stdout.split("\n")
    return {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "diversify": getattr(diversify, "__version__", None), "diversify_path": str(Path(diversify.__file__).parent),
        "git_head": head, "library_uncommitted_files": [d for d in dirty if d.strip()],
        "library_source_sha256": _library_digest(),
        "numpy": ver("numpy"), "numba": ver("numba"), "rensa": ver("rensa"), "datasketch": ver("datasketch"),
    }


def run(corpora, cache: Path, methods=METHODS, check: bool = False, repeat: int = 1, save=None) -> dict:
    """Every method on every corpus; ``save(results)`` after each corpus (a long run keeps its progress)."""
    out_dir = cache / "runs"
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {"environment": environment(), "threshold": T, "repeat": repeat, "corpora": {}}
    # warm-up: numba compiles (or loads its cache) once, outside the measured runs
    warm = cache / "clough.jsonl"
    if warm.exists() and any(m.startswith("diversify") for m in methods):
        w = _timed([sys.executable, "-m", "diversify", "build", str(warm), "-o", str(out_dir / "warmup.dvf"),
                    "--no-progress"], out_dir / "warmup.log")
        results["environment"]["warmup_build_seconds"] = w["wall_seconds"]
    for name in corpora:
        corpus = cache / f"{name}.jsonl"
        if not corpus.exists():
            results["corpora"][name] = {"skipped": f"{corpus} missing (assembled from this machine's files)"}
            continue
        print(f"[{name}] truth ...", flush=True)
        t0 = time.perf_counter()
        truth = truthmod.load_or_compute(corpus, T, cache=cache)
        entry = {"truth": dict(truth.meta, load_seconds=round(time.perf_counter() - t0, 2))}
        comps = _components(truth.n, truth.pi, truth.pj)
        csize = np.unique(comps, return_counts=True)[1]
        entry["truth"].update(components=int(csize.size), components_with_copies=int((csize > 1).sum()),
                              largest_component=int(csize.max()), docs_with_a_copy=int(csize[csize > 1].sum()))
        print(f"[{name}] {json.dumps(entry['truth'])}", flush=True)
        lengths = None
        pos = {d: k for k, d in enumerate(truth.ids)}
        entry["methods"] = {}
        below_pairs = []
        for m in methods:
            print(f"[{name}] {m} ...", flush=True)
            if m.startswith("diversify"):
                ids, cl, rep, info = _repeat(lambda: run_diversify(corpus, out_dir, m), repeat)
                order = np.array([pos[d] for d in ids])
                labels = np.empty(truth.n, dtype=np.int64)
                reps = np.zeros(truth.n, dtype=bool)
                labels[order] = cl
                reps[order] = rep
                info["representative"] = "the library's (default: longest)"
            else:
                labels, edges, info = _repeat(lambda: run_peer(m, corpus, out_dir), repeat)
                if lengths is None:
                    _, texts = truthmod.read_corpus(corpus)
                    lengths = np.array([len(x) for x in texts])
                    del texts
                reps = _longest_rep(labels, lengths)
                info["representative"] = "none in the tool; the longest text of each cluster, chosen here"
            s = score(labels, reps, truth, comps)
            if not m.startswith("diversify"):
                s.update(edge_scores(edges, truth))
            below_pairs += s.pop("_below_pairs")
            if name == "clough":
                s["clustered_with_source_by_category"] = clough_categories(labels, truth, cache / "clough.labels.json")
            entry["methods"][m] = {"scores": s, "run": info}
            print(f"[{name}] {m}: {info['wall_seconds']} s, " + json.dumps(
                {k: v for k, v in s.items() if k != "worst_folds"}), flush=True)
        if check:
            t1 = time.perf_counter()
            entry["checks"] = {"join_vs_brute_force": truthmod.brute_force_check(truth, 800), "seconds": None}
            entry["checks"]["seconds"] = round(time.perf_counter() - t1, 1)
        entry["string_audit"] = truthmod.audit(corpus, truth, extra_pairs=sorted(set(below_pairs)), sample=1000)
        results["corpora"][name] = entry
        if save is not None:
            save(results)
    results["environment"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return results
