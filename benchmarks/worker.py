"""One measurement in a fresh process: ``python -m benchmarks.worker <job.json>``.

Jobs:
- ``{"kind": "tool", "tool": ..., "corpus": path, "out": prefix, "kwargs": {...}}`` loads the texts,
  warms the tool up, resets the kernel's peak-RSS counter, runs the tool and writes
  ``prefix.json`` (timings, RSS) and ``prefix.npz`` (labels).
- ``{"kind": "truth", "corpus": path, "out": path, "threshold": t}`` computes exact truth pairs.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

import numpy as np


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak() -> bool:
    """Reset VmHWM (peak RSS) to the current RSS; Linux ≥ 4.0. False when not allowed."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakSampler:
    """Fallback when VmHWM cannot be reset: sample RSS every 5 ms in a thread."""

    def __init__(self):
        import threading

        self.peak = _status_kb("VmRSS")
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _status_kb("VmRSS"))

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _status_kb("VmRSS"))


def load_texts(path: str) -> list[str]:
    meta = np.load(path + ".npz")
    offsets = meta["offsets"]
    with open(path + ".bin", "rb") as f:
        blob = f.read()
    texts = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    del blob
    return texts


def _raise_priority() -> int:
    """On a shared machine, run every measured tool at the same raised priority (nice -10 when
    allowed), so other people's jobs disturb the timings less; returns the niceness in effect."""
    try:
        return os.nice(-10 - os.nice(0))
    except OSError:
        return os.nice(0)


def run_tool(job: dict) -> None:
    from .tools import RUNNERS, warm_up

    niceness = _raise_priority() if job.get("priority", True) else os.nice(0)
    tool = job["tool"]
    kwargs = job.get("kwargs", {})
    texts = load_texts(job["corpus"])
    ids = [f"doc-{i:07d}" for i in range(len(texts))]
    t = time.perf_counter()
    warm_up(tool, **kwargs)
    warm = time.perf_counter() - t
    gc.collect()
    load_before = os.getloadavg()
    cpu0 = os.times()
    base_kb = _status_kb("VmRSS")
    exact_peak = reset_peak() and _status_kb("VmHWM") <= base_kb + 1024
    if exact_peak:
        out = RUNNERS[tool](texts, ids, **kwargs)
        peak_kb = _status_kb("VmHWM")
    else:
        with PeakSampler() as s:
            out = RUNNERS[tool](texts, ids, **kwargs)
        peak_kb = s.peak
    cpu1 = os.times()
    rec = dict(tool=tool, kwargs=kwargs, n_docs=len(texts), warmup_s=warm, timings=out["timings"],
               loadavg_before=load_before, loadavg_after=os.getloadavg(), niceness=niceness,
               cpu_s=(cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
               params=out.get("params", {}), rss_before_mb=base_kb / 1024, rss_peak_mb=peak_kb / 1024,
               rss_delta_mb=(peak_kb - base_kb) / 1024,
               peak_method="VmHWM reset via /proc/self/clear_refs" if exact_peak else "RSS sampled every 5 ms",
               text_mb=sum(map(len, texts)) / 2**20)
    arrays = {"labels": out["labels"]}
    if "labels_verified" in out:
        arrays["labels_verified"] = out["labels_verified"]
    np.savez(job["out"] + ".npz", **arrays)
    with open(job["out"] + ".json", "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1, default=str)


def run_truth(job: dict) -> None:
    from .reference import ShingleHasher
    from .truth import similarity_join

    texts = load_texts(job["corpus"])
    t0 = time.perf_counter()
    hasher = ShingleHasher()
    ptrs, vals = [np.zeros(1, dtype=np.int64)], []
    for s in range(0, len(texts), 5000):
        ip, hs = hasher.hash_many(texts[s : s + 5000])
        ptrs.append(ip[1:] + ptrs[-1][-1])
        vals.append(hs)
    del texts
    indptr = np.concatenate(ptrs)
    hashes = np.concatenate(vals) if vals else np.zeros(0, np.uint64)
    del vals
    t1 = time.perf_counter()
    pairs, jac, stats = similarity_join(indptr, hashes, job["threshold"])
    t2 = time.perf_counter()
    stats.update(hash_s=t1 - t0, join_s=t2 - t1, peak_rss_mb=_status_kb("VmHWM") / 1024)
    np.savez(job["out"], pairs=pairs, jaccard=jac, stats=json.dumps(stats))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        job = json.load(f)
    if job.get("threads"):
        os.environ["NUMBA_NUM_THREADS"] = str(job["threads"])
    {"tool": run_tool, "truth": run_truth}[job["kind"]](job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
