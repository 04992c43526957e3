"""What a hostile request costs: a maximal forged cursor, and a store that answers far more hits
than it was asked for, against an artifact and a live SQLite index of the same documents.

``python -m benchmarks.request_cost [--n 20000] [--repeat 3] [--out file.json]``

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
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
import time

import msgpack
import numpy as np


def forged(ids) -> str:
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args()

    import diversify
    from diversify.online import cursor

    n = args.n
    v = np.random.default_rng(0).normal(size=(n, 16))
    tmp = tempfile.mkdtemp()
    idx = diversify.Index(f"sqlite:///{tmp}/index.db")
    for lo in range(0, n, 5000):
        idx.add(vectors=v[lo:lo + 5000], ids=list(range(lo, min(n, lo + 5000))))
    idx.export(f"{tmp}/a.dvf")
    token, n_ids = largest_forged(cursor.MAX_CURSOR_CHARS)
    limit = getattr(cursor, "cursor_id_limit", None)
    cases = [(f"largest token under the size limit ({n_ids} ids), k=10", token, 10)]
    for k in (10, 50):
        if limit is not None:
            cases.append((f"largest accepted token, k={k} ({limit(k)} ids)", forged(range(limit(k))), k))
    other = [(n + j, 1.0 - j / 1000) for j in range(200)]
    flood = [(j, 1.0 - j / 20_000) for j in range(20_000)]
    rows = []
    for where, cm in (("artifact", diversify.load(f"{tmp}/a.dvf")), ("live sqlite", idx)):
        for label, tok, k in cases:
            ms, outcome = timed(lambda k=k: diversify.Diversifier(cm, k=k, max_rounds=0).wrap(lambda q, kk: other[:kk]),
                                lambda s, tok=tok: s("q", cursor=tok), args.repeat)
            rows.append({"where": where, "case": label, "ms": round(ms, 2), "outcome": outcome})
        for exclude in (False, True):
            ms, outcome = timed(lambda e=exclude: diversify.Diversifier(cm, k=10, max_rounds=0).wrap(
                (lambda q, k, ex=None: flood) if e else (lambda q, k: flood), supports_exclude=e),
                lambda s: s("q"), args.repeat)
            rows.append({"where": where, "case": f"20,000 hits for 25 asked, exclusion={exclude}",
                         "ms": round(ms, 2), "outcome": outcome})
        deep = [(j % n, 1.0 - j / 200_000) for j in range(200_000)]
        raw = msgpack.packb({"v": 2, "o": cursor.MAX_CURSOR_OFFSET, "a": [], "p": []})
        tok = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        ms, outcome = timed(lambda: diversify.Diversifier(cm, k=10).wrap(lambda q, k: deep[:k]),
                            lambda s: s("q", cursor=tok), args.repeat)
        rows.append({"where": where, "case": "forged offset 100,000, no exclusion filters", "ms": round(ms, 2),
                     "outcome": outcome})
    for r in rows:
        print(f"{r['where']:12} {r['case']:58} {r['ms']:10.2f} ms  {r['outcome']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"n": n, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
