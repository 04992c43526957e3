"""Per-query numbers of one row, their summary, and the suite's pass/fail checks.

Everything is judged from the corpus, never from what a store returned: the cluster of an id
comes from the artifact (``ClusterMap.lookup``), its tenant from the chunk table, near-duplicate
pairs from :mod:`.shingles` (exact Jaccard, independent of the library).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .shingles import NearDuplicates
from .systems import K, Outcome


@dataclass
class Judge:
    cluster_of: np.ndarray  # by chunk id
    tenant_of: list  # by chunk id
    near: NearDuplicates


def make_judge(s) -> Judge:
    cids = np.asarray(s.cluster_map.lookup(s.corpus.ids), dtype=np.int64)
    return Judge(cids, [c.tenant for c in s.corpus.chunks], NearDuplicates(lambda i: s.corpus.chunks[i].text))


def per_query(outcome: Outcome, rec: dict, tenant: Optional[str], judge: Judge) -> dict:
    ids = list(outcome.ids)
    top = ids[:K]
    return {"returned": len(ids), "repeated_ids": len(ids) - len(set(ids)),
            "distinct": len({int(judge.cluster_of[i]) for i in top}), "dup_pairs": judge.near.pairs(top),
            "violations": 0 if tenant is None else sum(judge.tenant_of[i] != tenant for i in ids),
            "calls": rec["calls"], "embeds": rec["embeds"], "cpu_ms": rec["cpu_s"] * 1e3,
            "backend_cpu_ms": rec["backend_cpu_s"] * 1e3, "own_cpu_ms": (rec["cpu_s"] - rec["backend_cpu_s"]) * 1e3,
            "wall_ms": rec["wall_s"] * 1e3, "own_wall_ms": (rec["wall_s"] - rec["backend_wall_s"]) * 1e3,
            "reported_calls": outcome.reported_calls, "exhausted": outcome.exhausted}


def _r(x, nd=3):
    return None if x is None else round(float(x), nd)


def _stats(values, prefix: str) -> dict:
    v = np.asarray(values, dtype=np.float64)
    return {f"{prefix}_mean": _r(v.mean()), f"{prefix}_p50": _r(np.percentile(v, 50)),
            f"{prefix}_p99": _r(np.percentile(v, 99)), f"{prefix}_max": _r(v.max())}


def aggregate(rows: list[dict], errors: list[str], n_queries: int) -> dict:
    out: dict = {"queries": n_queries, "measured": len(rows), "errors": len(errors),
                 "first_errors": sorted(set(errors))[:3]}
    if not rows:
        return out

    def col(name):
        return [r[name] for r in rows]

    by_q = {r["q"]: r["distinct"] for r in rows}

    out.update({"distinct_mean": _r(np.mean(col("distinct"))), "distinct_min": min(col("distinct")),
                "dup_pairs_mean": _r(np.mean(col("dup_pairs"))), "dup_pairs_max": max(col("dup_pairs")),
                "returned_mean": _r(np.mean(col("returned"))), "returned_min": min(col("returned")),
                "short_queries": sum(r["returned"] < K for r in rows), "repeated_ids": sum(col("repeated_ids")),
                "results": sum(col("returned")), "violations": sum(col("violations")),
                "violating_queries": sum(r["violations"] > 0 for r in rows),
                "store_calls_mean": _r(np.mean(col("calls"))), "store_calls_max": max(col("calls")),
                "embed_calls_mean": _r(np.mean(col("embeds"))),
                "distinct_per_query": [by_q.get(j) for j in range(n_queries)]})
    for name in ("cpu_ms", "backend_cpu_ms", "own_cpu_ms", "wall_ms", "own_wall_ms"):
        out.update(_stats(col(name), name))
    reported = [r for r in rows if r["reported_calls"] is not None]
    if reported:
        out["reported_calls_match"] = sum(r["reported_calls"] == r["calls"] for r in reported)
        out["reported_calls_mean"] = _r(np.mean([r["reported_calls"] for r in reported]))
        out["exhausted"] = sum(bool(r["exhausted"]) for r in reported)
    return out


def is_mmr(method: str) -> bool:
    m = method.lower()
    return "mmr" in m or "marginal_relevance" in m


def checks(results: list[dict]) -> list[dict]:
    """Pass/fail: no filter violation; diversify at least as many distinct clusters as the same
    framework's MMR on the same store; ``Result.backend_calls`` equals the counted store calls;
    no row raised."""
    out = []
    for r in results:
        name = f"{r['framework']} · {r['store']} · {r['method']}"
        for mode, m in r["modes"].items():
            if m.get("errors"):
                out.append({"check": "no errors", "row": name, "mode": mode, "ok": False,
                            "got": f"{m['errors']} of {m['queries']} queries raised: {m['first_errors'][0]}"})
            if mode == "tenant" and "violations" in m:
                out.append({"check": "filter violations == 0", "row": name, "mode": mode,
                            "ok": m["violations"] == 0,
                            "got": f"{m['violations']} of {m['results']} results ({m['violating_queries']} queries)"})
            if "reported_calls_match" in m:
                out.append({"check": "Result.backend_calls == counted store calls", "row": name, "mode": mode,
                            "ok": m["reported_calls_match"] == m["measured"],
                            "got": f"{m['reported_calls_match']} of {m['measured']} queries"})
        if r["kind"] != "diversify":
            continue
        for p in results:
            if p["kind"] == "peer" and is_mmr(p["method"]) and p["framework"] == r["framework"] \
                    and p["store"] == r["store"]:
                out += [_versus_mmr(name, mode, m, p) for mode, m in r["modes"].items() if mode in p["modes"]]
    return [c for c in out if c is not None]


def _versus_mmr(name: str, mode: str, m: dict, p: dict) -> dict | None:
    """Mean distinct clusters of a diversify row and of the MMR row, over the queries both answered."""
    a, b = m.get("distinct_per_query"), p["modes"][mode].get("distinct_per_query")
    if not a or not b:
        return None
    both = [j for j in range(min(len(a), len(b))) if a[j] is not None and b[j] is not None]
    if not both:
        return None
    ours, theirs = float(np.mean([a[j] for j in both])), float(np.mean([b[j] for j in both]))
    return {"check": "distinct clusters >= framework MMR", "row": name, "mode": mode, "ok": ours >= theirs,
            "got": f"{ours:.2f} vs {theirs:.2f} ({p['method']}, {len(both)} queries)"}
