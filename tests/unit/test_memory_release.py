"""A large build gives the heap pages its sketching freed back to the system before linking."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                           reason="malloc_trim is glibc's")

_PROBE = """
import sys
from diversify._tuning import keep_freed_memory, release_free_heap
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
assert keep_freed_memory()  # as the console script runs: freed memory stays in the heap
texts = [bytes(3000) + i.to_bytes(4, "little") for i in range(70_000)]  # ~210 MiB of small blocks
keep = texts[::1000]  # a few survivors scattered through the heap, as ids and results are
held = rss()
del texts
kept = rss()
released = release_free_heap()
print(released, held - kept, kept - rss())
"""


@glibc
def test_release_free_heap_returns_freed_small_blocks_the_tuned_heap_kept():
    # as a user without malloc settings of their own runs it (the tuning stands aside for those)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    r = subprocess.run([sys.executable, "-c", _PROBE], env=clean, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    released, on_free, on_trim = r.stdout.split()
    assert released == "True"
    assert int(on_free) <= 20  # kept by the tuned heap...
    assert int(on_trim) >= 150  # ...until the trim gives it back


def test_a_large_build_trims_after_sketching_and_a_small_one_does_not(monkeypatch):
    from diversify import _tuning

    calls = []
    monkeypatch.setattr(_tuning, "release_free_heap", lambda: calls.append(1) or True)
    monkeypatch.setattr(_tuning, "TRIM_FROM", 50)
    import diversify

    diversify.build([f"document number {i} with some words" for i in range(49)])
    assert calls == []
    diversify.build([f"document number {i} with some words" for i in range(50)])
    assert calls == [1]
