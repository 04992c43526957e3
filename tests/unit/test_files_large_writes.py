"""Large files go past the page cache (``O_DIRECT``) and keep their bytes, their atomicity and
their errors: :func:`diversify.files.write_pieces`, used by every artifact write."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diversify import files
from diversify.artifact.format import read_container, write_container

pytestmark = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="O_DIRECT is Linux's")


def _pieces(sizes: list[int], seed: int) -> list:
    rng = np.random.default_rng(seed)
    out: list = []
    for i, n in enumerate(sizes):
        data = rng.integers(0, 256, n, dtype=np.uint8)
        out.append(data.tobytes() if i % 2 else memoryview(data))  # bytes and buffers alike
    return out


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 20_000), min_size=0, max_size=8), seed=st.integers(0, 2**16))
def test_direct_write_gives_the_same_bytes(tmp_path_factory, sizes, seed):
    """Any piece sizes, blocks of 8 KiB (several writes, a padded last block cut back): the file
    holds the pieces, in order, and nothing else."""
    path = tmp_path_factory.mktemp("direct") / "f"
    pieces = _pieces(sizes, seed)
    total = sum(len(memoryview(p)) for p in pieces)
    old = files._DIRECT_BLOCK
    files._DIRECT_BLOCK = 8192
    try:
        with open(path, "wb") as f:
            assert files._write_direct(f, pieces, total) is True
            f.write(b"")  # the file object is still usable, at the end
            assert f.tell() == total
    finally:
        files._DIRECT_BLOCK = old
    assert path.read_bytes() == b"".join(bytes(memoryview(p)) for p in pieces)


def test_direct_write_restores_the_descriptor_flags(tmp_path):
    path = tmp_path / "f"
    with open(path, "wb") as f:
        before = files.fcntl.fcntl(f.fileno(), files.fcntl.F_GETFL)
        assert files._write_direct(f, [b"x" * 5000], 5000)
        assert files.fcntl.fcntl(f.fileno(), files.fcntl.F_GETFL) == before
        f.write(b"tail")  # an unaligned buffered write after it works
    assert path.read_bytes() == b"x" * 5000 + b"tail"


def test_a_pipe_gets_buffered_writes(monkeypatch):
    """Not a regular file: nothing is tried past the page cache, every byte arrives."""
    monkeypatch.setattr(files, "DIRECT_MIN_BYTES", 0)
    pieces = _pieces([70_000, 3, 0, 12_345], 1)
    r, w = os.pipe()
    got = bytearray()

    def drain() -> None:
        with os.fdopen(r, "rb") as rf:
            got.extend(rf.read())

    t = threading.Thread(target=drain)
    t.start()
    with os.fdopen(w, "wb") as wf:
        assert files._write_direct(wf, pieces, 82_348) is False
        files.write_pieces(wf, pieces, 82_348)
    t.join()
    assert bytes(got) == b"".join(bytes(memoryview(p)) for p in pieces)


def test_large_artifact_same_bytes_either_way(tmp_path, monkeypatch):
    """An artifact over the threshold: the direct write and the buffered one give the same file."""
    rng = np.random.default_rng(3)
    arrays = {"sig": rng.integers(0, 2**32, (70_000, 128), dtype=np.uint32), "ids": np.arange(70_001, dtype=np.int64)}
    assert sum(a.nbytes for a in arrays.values()) >= files.DIRECT_MIN_BYTES
    write_container(tmp_path / "direct.dvf", {"k": "v"}, arrays)
    monkeypatch.setattr(files, "DIRECT_MIN_BYTES", 1 << 62)
    write_container(tmp_path / "buffered.dvf", {"k": "v"}, arrays)
    assert (tmp_path / "direct.dvf").read_bytes() == (tmp_path / "buffered.dvf").read_bytes()
    header, back = read_container(tmp_path / "direct.dvf")
    np.testing.assert_array_equal(back["sig"], arrays["sig"])


def test_a_write_cut_short_leaves_the_old_file(tmp_path):
    """A file size limit (RLIMIT_FSIZE, as a full disk) stops the direct write mid-way: an error
    naming the cause, the old artifact untouched, no temp file left."""
    path = tmp_path / "a.dvf"
    write_container(path, {"v": 1}, {"x": np.arange(10)})
    before = path.read_bytes()
    code = textwrap.dedent(
        f"""
        import resource, signal, sys
        import numpy as np
        from diversify.artifact.format import write_container
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (40 << 20, 40 << 20))
        try:
            write_container({str(path)!r}, {{"v": 2}}, {{"x": np.ones(64 << 20, dtype=np.uint8)}})
        except OSError as exc:
            print("errno", exc.errno)
            sys.exit(3)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr
    assert out.stdout.strip() == f"errno {__import__('errno').EFBIG}"
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["a.dvf"], "the temp file and the lock file are removed"
