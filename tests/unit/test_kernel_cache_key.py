"""The kernels' on-disk cache is keyed by every kernel module's source.

Numba checks a cached kernel against its own file only; a kernel that calls into another module
would otherwise load stale machine code after that module changed (an upgrade or an edit)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from diversify._kernels import _runtime, _sources


def _copy_kernels(tmp_path):
    src = os.path.dirname(os.path.abspath(_runtime.__file__))
    dst = tmp_path / "k"
    dst.mkdir()
    for name in os.listdir(src):
        if name.endswith(".py"):
            shutil.copyfile(os.path.join(src, name), dst / name)
    return src, dst


def test_the_digest_is_the_installed_sources_and_moves_with_any_module(tmp_path):
    src, dst = _copy_kernels(tmp_path)
    assert _sources.digest_of_sources(str(dst)) == _sources.sources_digest() == _sources.digest_of_sources(src)
    before = _sources.digest_of_sources(str(dst))
    (dst / "minhash.py").write_text((dst / "minhash.py").read_text() + "\n# a callee changed\n")
    after = _sources.digest_of_sources(str(dst))
    assert after != before and len(after) == 16
    (dst / "minhash.py").unlink()  # a module removed changes it too
    assert _sources.digest_of_sources(str(dst)) not in (before, after)


def test_files_that_are_not_sources_do_not_move_it(tmp_path):
    _, dst = _copy_kernels(tmp_path)
    before = _sources.digest_of_sources(str(dst))
    (dst / "notes.txt").write_text("x")
    (dst / "__pycache__").mkdir()
    assert _sources.digest_of_sources(str(dst)) == before


def test_a_process_caches_under_the_digest_of_its_sources():
    from diversify._kernels import _common as c

    c.fmix64(12345)
    place = _runtime.cache_place()
    path = str(getattr(c.fmix64.stats, "cache_path", "") or "")
    if place is None or not path:
        pytest.skip("the kernels run uncached in this environment")
    assert os.path.dirname(path) == os.path.join(place, "src-" + _sources.sources_digest())


def _plus_one(x):
    return x + 1


def test_caches_given_from_several_threads_at_once_all_land_in_the_place(tmp_path):
    """Kernel modules are imported from two threads at once (the CLI loads cached kernels in a
    thread beside the input's reading); numba reads its cache directory from a global, so giving
    dispatchers their cache must not let one thread's restore reach another's."""
    import threading

    import numba

    if not hasattr(numba.njit(_plus_one), "enable_caching"):
        pytest.skip("NUMBA_DISABLE_JIT: no dispatchers")
    place = str(tmp_path / "cache")
    os.makedirs(place)
    results: list = []
    start = threading.Barrier(4)

    def give(k: int) -> None:
        start.wait()
        for _ in range(k):
            results.append(_runtime._cache_in(place, numba.njit(_plus_one)))

    threads = [threading.Thread(target=give, args=(200,)) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so that an unguarded global is caught
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(results) == 800 and all(results), f"{results.count(False)} of 800 dispatchers got no cache in {place}"
