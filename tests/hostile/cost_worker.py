"""What loading (and querying) one artifact costs, in a process whose address space is capped
(run by tests/unit/test_artifact_reader_lies.py; by hand: ``python tests/hostile/cost_worker.py PATH [QUERIES [IDS]]``).

Caps the address space at its size after imports + ``DVF_CAP_MB`` (default 256) MiB, loads PATH
with ``diversify.load`` and, when QUERIES > 0, runs QUERIES lookups of IDS ids each (the
artifact's own first ids, as a server would ask), then prints one JSON line: the outcome
(``loaded`` or the ``ArtifactError`` message), the load and lookup seconds, and the peak RSS
(``VmHWM``) above the RSS at the start. Any other exception (``MemoryError`` under the cap included) is
printed as ``crashed``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

import numpy as np

from diversify.artifact import load
from diversify.errors import ArtifactError


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main(argv: list) -> int:
    path = argv[1]
    queries = int(argv[2]) if len(argv) > 2 else 0
    per_query = int(argv[3]) if len(argv) > 3 else 50
    cap = _status_kb("VmSize") * 1024 + int(os.environ.get("DVF_CAP_MB", "256")) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    rss0 = _status_kb("VmRSS")
    out: dict = {"load_s": None, "lookup_s": None}
    t = time.perf_counter()
    try:
        cm = load(path)
        out["load_s"] = time.perf_counter() - t
        ids = cm.ids[:per_query]
        ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        t = time.perf_counter()
        for _ in range(queries):
            got = cm.lookup(ids)
        out["lookup_s"] = time.perf_counter() - t
        out["outcome"] = "loaded"
        if queries:
            out["found"] = int((got >= 0).sum())
    except ArtifactError as exc:
        out["outcome"] = "refused: " + str(exc)
    except BaseException as exc:  # noqa: BLE001 - the property under test: nothing else
        out["outcome"] = f"crashed: {type(exc).__name__}: {exc}"[:500]
    out["peak_mb"] = (_status_kb("VmHWM") - rss0) / 1024  # not ru_maxrss: it keeps the forking parent's peak
    if out["load_s"] is None:
        out["load_s"] = time.perf_counter() - t
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
