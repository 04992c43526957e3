"""Sketch throughput in bytes/s per kind of text, next to a memory-bandwidth baseline.

``python -m benchmarks.peers.throughput PREFIX [PREFIX ...]`` prints one JSON object: for each
corpus file (:func:`benchmarks.corpora.write_texts`), its UTF-8 MiB, the build's sketch stage
(encode + kernels; reading excluded: the texts are in memory) and whole ``diversify.build`` in
MB/s, best of ``REPEATS`` after a warm-up; and numpy summing the same bytes (``uint64`` view) as
the ceiling any pass over them has on this machine.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

REPEATS = 3


def _baseline(texts: list[str]) -> dict:
    blob = "".join(texts).encode("utf-8")
    buf = np.frombuffer(blob[: len(blob) // 8 * 8], dtype=np.uint64)
    best = float("inf")
    for _ in range(REPEATS + 2):
        t = time.perf_counter()
        buf.sum()
        best = min(best, time.perf_counter() - t)
    return dict(numpy_sum_mb_s=len(blob) / best / 1e6)


def measure(prefix: str) -> dict:
    import diversify

    from ..corpora import load_texts

    texts = load_texts(prefix)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    diversify.build(texts[:500])  # compile / load the kernels
    sketch = total = float("inf")
    cpu = float("inf")
    for _ in range(REPEATS):
        c0 = time.process_time()
        t0 = time.perf_counter()
        res = diversify.build(texts)
        total = min(total, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        sketch = min(sketch, res.timings.get("sketch_total", float("nan")))
    return dict(docs=len(texts), mib=nbytes / 2**20, sketch_s=sketch, sketch_mb_s=nbytes / sketch / 1e6,
                build_s=total, build_mb_s=nbytes / total / 1e6, build_cpu_s=cpu, **_baseline(texts))


def main(argv: list[str]) -> int:
    print(json.dumps({p: measure(p) for p in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
