"""``diversify.build`` of texts turns numpy's huge-page advice off while it runs and restores it
(diversify/_tuning.py: small_pages), as the console script does with NUMPY_MADVISE_HUGEPAGE=0."""

from __future__ import annotations

import threading

import pytest

import diversify
from diversify import _tuning

setter = _tuning._hugepage_setter()
pytestmark = pytest.mark.skipif(setter is None, reason="this numpy has no huge-page switch")


def current() -> bool:
    """numpy's setting now (the setter returns the previous one)."""
    was = setter(True)
    setter(was)
    return bool(was)


@pytest.fixture
def no_user_setting(monkeypatch):
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    before = current()
    yield
    setter(before)


@pytest.mark.parametrize("start", [True, False])
def test_off_inside_and_restored_after(no_user_setting, start):
    setter(start)
    with _tuning.small_pages():
        assert current() is False
        with _tuning.small_pages():
            assert current() is False
        assert current() is False  # the outer one still runs
    assert current() is start


def test_restored_after_an_error(no_user_setting):
    setter(True)
    with pytest.raises(ZeroDivisionError), _tuning.small_pages():
        1 / 0
    assert current() is True


def test_user_setting_is_left_alone(monkeypatch):
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    before = current()
    try:
        setter(True)
        with _tuning.small_pages():
            assert current() is True
    finally:
        setter(before)


def test_overlapping_builds_in_threads_restore_once_all_left(no_user_setting):
    setter(True)
    inside, release = threading.Barrier(3), threading.Event()

    def hold():
        with _tuning.small_pages():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert current() is False
    release.set()
    for t in threads:
        t.join()
    assert current() is True


def test_build_seen_from_inside(no_user_setting, monkeypatch):
    """The setting a build's sketching runs under, and the one it leaves."""
    import diversify.engines.local as local

    seen = []
    real = local.sketch_inputs

    def spy(*args, **kwargs):
        seen.append(current())
        return real(*args, **kwargs)

    monkeypatch.setattr(local, "sketch_inputs", spy)
    setter(True)
    res = diversify.build(["a b c d e f g", "a b c d e f g", "other words here"])
    assert seen == [False] and current() is True
    assert res.cluster_ids.tolist() == [0, 0, 2]
