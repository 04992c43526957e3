"""The clique suite's processes: ``diversify build --clustering X`` as users run it, and the peers.

Clusterings are asked for by today's names (``clique``, ``star``, ``components``). A name the
measured commit's ``BuildConfig`` refuses is tried under its older spelling (``star`` was
``guaranteed``); a clustering the commit has under no spelling is reported unavailable, not fatal.
Every build is a fresh process (``_real_scores._timed``: wall and CPU seconds, peak RSS); the
labels, representatives and the build info (``pairs_checked`` of the fold checks) come from the
artifact it wrote.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

CLUSTERINGS = ("clique", "star", "components")
SPELLINGS = {"star": ("star", "guaranteed"), "clique": ("clique",), "components": ("components",)}


def resolve(name: str) -> tuple[str | None, str]:
    """(the spelling this commit's config accepts, or None; why)."""
    import diversify

    errors = []
    for spelling in SPELLINGS.get(name, (name,)):
        try:
            diversify.BuildConfig(clustering=spelling)
        except diversify.DiversifyError as e:
            errors.append(f"{spelling!r}: {str(e)[:160]}")
            continue
        return spelling, "accepted" if spelling == name else f"spelled {spelling!r} by this commit"
    return None, "this commit's BuildConfig refuses " + "; ".join(errors)


def default_clustering() -> str:
    import diversify

    return str(diversify.BuildConfig().clustering)


def build(corpus: Path, out_dir: Path, spelling: str, tag: str) -> tuple[list, np.ndarray, np.ndarray, dict]:
    """One ``diversify build`` process; (ids, cluster ids, is-representative, run record)."""
    import diversify

    art = out_dir / f"{corpus.stem}.{tag}.dvf"
    cmd = [sys.executable, "-m", "diversify", "build", str(corpus), "-o", str(art), "--no-progress",
           "--clustering", spelling]
    from ._real_scores import _timed  # (it loads scipy through the truth module: not at import)

    info = _timed(cmd, out_dir / f"{corpus.stem}.{tag}.log")
    cm = diversify.load(art)
    bi = dict(cm.build_info)
    fold = bi.get("fold") or {}
    info.update(spelling=spelling, candidates=bi.get("candidates"), verified=bi.get("verified"),
                pairs_checked=fold.get("pairs_checked"), fold=fold,
                library_purity=bi.get("purity"))
    ids = list(cm.ids)
    return ids, np.asarray(cm.cluster_ids), np.asarray(cm.is_representative, dtype=bool), info


def placed(ids: list, cl: np.ndarray, rep: np.ndarray, pos: dict) -> tuple[np.ndarray, np.ndarray]:
    """Labels and representatives in the truth's document order."""
    order = np.array([pos[d] for d in ids], dtype=np.int64)
    labels = np.empty(len(ids), dtype=np.int64)
    reps = np.zeros(len(ids), dtype=bool)
    labels[order] = cl
    reps[order] = rep
    return labels, reps


def family_run(corpus: Path, out_dir: Path, spelling: str, tag: str) -> dict:
    """A family build: clusters, the largest, share of the family's pairs folded together, checks."""
    ids, cl, _, info = build(corpus, out_dir, spelling, tag)
    _, counts = np.unique(cl, return_counts=True)
    n = len(ids)
    together = int((counts * (counts - 1) // 2).sum())
    info.pop("stdout_tail", None)
    return dict(info, docs=n, clusters=int(counts.size), largest_cluster=int(counts.max()),
                pair_recall=together / (n * (n - 1) // 2) if n > 1 else 1.0,
                pairs_checked_per_doc=(info["pairs_checked"] / n) if info.get("pairs_checked") is not None else None)


def cli_times(corpus: Path, out_dir: Path, spellings: dict, repeat: int) -> dict:
    """Whole-process builds of the cli suite's corpus, ``repeat`` rounds after one warm-up round;
    the clusterings alternate within each round. Median wall and CPU seconds per clustering."""
    runs: dict[str, list[dict]] = {name: [] for name in spellings}
    for k in range(repeat + 1):
        for name, spelling in spellings.items():
            art = out_dir / f"cli.{name}.dvf"
            cmd = [sys.executable, "-m", "diversify", "build", str(corpus), "-o", str(art), "--no-progress",
                   "--clustering", spelling]
            from ._real_scores import _timed

            got = _timed(cmd, out_dir / f"cli.{name}.log")
            if k:
                runs[name].append(got)
    out = {}
    for name, rs in runs.items():
        walls = [r["wall_seconds"] for r in rs]
        cpus = [r["cpu_seconds"] for r in rs if r["cpu_seconds"] is not None]
        out[name] = {"spelling": spellings[name], "wall_seconds": statistics.median(walls), "wall_seconds_all": walls,
                     "cpu_seconds": statistics.median(cpus) if cpus else None, "cpu_seconds_all": cpus,
                     "peak_rss_mb": max((r["peak_rss_mb"] or 0) for r in rs) or None,
                     "loadavg": [rs[0]["loadavg_before"][0], rs[-1]["loadavg_after"][0]]}
    return out
