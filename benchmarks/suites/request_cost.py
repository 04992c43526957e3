"""request_cost: what a hostile request costs: a maximal forged cursor, and a store that answers far
more hits than it was asked for, against an artifact and a live SQLite index of the same documents.

An index of ``--n`` random vectors with int ids 0..n-1 (so a forger knows the ids), exported to an
artifact. Timed per case, the best of ``--repeat`` runs, each with a new ``Diversifier`` (cold
lookup caches):

* the token under ``MAX_CURSOR_CHARS`` that carries the most distinct ids of the index (16,507
  small ints), handed to a request for k=10;
* the largest token a request for k=10 and for k=50 accepts (``cursor_id_limit(k)`` ids of the
  index);
* a search that answers 20,000 hits to a request for ``fetch_k`` (25), without and with
  exclusion filters;
* a token claiming the largest offset (100,000), to a search without exclusion filters.

docs/security.md ("Online") quotes these numbers, before and after the request bound.

``python -m benchmarks run --suite request_cost [--n 20000] [--repeat 3]``
"""

from __future__ import annotations

import base64
import tempfile
import time

import numpy as np

from ..markdown import command, table
from . import Suite

SUITE = Suite(
    name="request_cost",
    summary="hostile requests: the largest forged cursor and a store flooding 20,000 hits, against an artifact "
            "and a live SQLite index (ms per request, outcome)",
    results=("request_cost.json",), render="benchmarks.suites.request_cost:render",
    quick={"n": 2000, "repeat": 1}, takes="~1 min")


def add_arguments(p) -> None:
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)


def forged(ids) -> str:
    import msgpack

    raw = msgpack.packb({"v": 2, "o": 0, "a": list(ids), "p": []})
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def largest_forged(max_chars: int) -> tuple[str, int]:
    lo, hi = 1, 60_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(forged(range(mid))) <= max_chars:
            lo = mid
        else:
            hi = mid - 1
    return forged(range(lo)), lo


def timed(make, call, repeat: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        search = make()
        t = time.perf_counter()
        try:
            call(search)
            outcome = "served"
        except Exception as exc:  # a refused cursor is an outcome here, not a failure
            outcome = type(exc).__name__
        best = min(best, time.perf_counter() - t)
    return best * 1000, outcome


def _setup(n: int):
    """A live SQLite index of ``n`` random vectors (ids 0..n-1) and its exported artifact."""
    import diversify

    v = np.random.default_rng(0).normal(size=(n, 16))
    tmp = tempfile.mkdtemp()
    idx = diversify.Index(f"sqlite:///{tmp}/index.db")
    for lo in range(0, n, 5000):
        idx.add(vectors=v[lo:lo + 5000], ids=list(range(lo, min(n, lo + 5000))))
    idx.export(f"{tmp}/a.dvf")
    return idx, diversify.load(f"{tmp}/a.dvf")


def _rows(where: str, cm, cases, n: int, repeat: int) -> list[dict]:
    import msgpack

    import diversify
    from diversify.online import cursor

    rows = []
    other = [(n + j, 1.0 - j / 1000) for j in range(200)]
    flood = [(j, 1.0 - j / 20_000) for j in range(20_000)]
    for label, tok, k in cases:
        ms, outcome = timed(lambda k=k: diversify.Diversifier(cm, k=k, max_rounds=0).wrap(lambda q, kk: other[:kk]),
                            lambda s, tok=tok: s("q", cursor=tok), repeat)
        rows.append({"where": where, "case": label, "ms": round(ms, 2), "outcome": outcome})
    for exclude in (False, True):
        ms, outcome = timed(lambda e=exclude: diversify.Diversifier(cm, k=10, max_rounds=0).wrap(
            (lambda q, k, ex=None: flood) if e else (lambda q, k: flood), supports_exclude=e),
            lambda s: s("q"), repeat)
        rows.append({"where": where, "case": f"20,000 hits for 25 asked, exclusion={exclude}",
                     "ms": round(ms, 2), "outcome": outcome})
    deep = [(j % n, 1.0 - j / 200_000) for j in range(200_000)]
    raw = msgpack.packb({"v": 2, "o": cursor.MAX_CURSOR_OFFSET, "a": [], "p": []})
    tok = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    ms, outcome = timed(lambda: diversify.Diversifier(cm, k=10).wrap(lambda q, k: deep[:k]),
                        lambda s: s("q", cursor=tok), repeat)
    rows.append({"where": where, "case": "forged offset 100,000, no exclusion filters", "ms": round(ms, 2),
                 "outcome": outcome})
    return rows


def run(args, ctx) -> list:
    from diversify.online import cursor

    from ..env import environment
    from ..paths import log, now, shown, write_json

    idx, artifact = _setup(args.n)
    token, n_ids = largest_forged(cursor.MAX_CURSOR_CHARS)
    limit = getattr(cursor, "cursor_id_limit", None)
    cases = [(f"largest token under the size limit ({n_ids} ids), k=10", token, 10)]
    for k in (10, 50):
        if limit is not None:
            cases.append((f"largest accepted token, k={k} ({limit(k)} ids)", forged(range(limit(k))), k))
    rows = []
    for where, cm in (("artifact", artifact), ("live sqlite", idx)):
        rows += _rows(where, cm, cases, args.n, args.repeat)
    for r in rows:
        log(f"{r['where']:12} {r['case']:58} {r['ms']:10.2f} ms  {r['outcome']}")
    path = write_json(ctx.results / "request_cost.json", {
        "suite": "request_cost", "command": ctx.command, "created": now(), "env": environment(), "n": args.n,
        "repeat": args.repeat, "rows": rows})
    log(f"wrote {shown(path)}")
    return [path]


# --- RESULTS.md section

def render(d: dict) -> list[str]:
    L = [f"## Cost of hostile requests ({d['n']:,} documents)", "",
         f"Best of {d.get('repeat')} runs, each with a new `Diversifier`. Command: "
         f"`{command(d.get('command'), 'python -m benchmarks run --suite request_cost')}`, {d.get('created')}.", ""]
    rows = [[r["where"], r["case"], f"{r['ms']:.2f}", r["outcome"]] for r in d["rows"]]
    return L + table(["where", "case", "ms", "outcome"], "llrl", rows) + [""]
