"""A build whose signatures and band keys are kept on disk (``build(spill_dir=...)``, the console
script's ``build --stream``): the temporary files, and that the build writes the bytes an
in-memory build writes.

Kind: oracle (the in-memory build and numpy), property (hypothesis), hostile (a full disk, a
missing directory).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diversify
from diversify import _spill
from diversify._spill import Spill, drop_pages, gather_rows, mapped_slices, row_blocks
from diversify.cli.main import main
from diversify.corpus.datagen import generate_corpus
from diversify.errors import ConfigError, DiversifyError

CREATED = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(1800, words_per_doc=60, dup_fraction=0.3, edit_rate=(0.0, 0.08), boilerplate_fraction=0.1,
                           n_templates=2, seed=23)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks far smaller than a corpus, so that every multi-block path runs (the band keys, the
    gathers, the artifact's writing)."""
    from diversify.clusters import guarantee
    from diversify.linking import spilled

    monkeypatch.setattr(spilled, "_SPILL_BLOCK", 4096)
    monkeypatch.setattr(_spill, "GATHER_ROWS", 4096)
    monkeypatch.setattr(_spill, "SLICE_BYTES", 8192)
    monkeypatch.setattr(_spill, "_STAGE", 8192)
    # the linking and the cut into clusters hold the signatures of ~40 documents at a time: many groups
    # of bands, bands cut between buckets, the fold's batches (of ~16 members) in many groups
    monkeypatch.setattr(_spill, "HELD_BYTES", 40 * 128 * 4)
    monkeypatch.setattr(_spill, "HELD_PER_DOC", 0)
    monkeypatch.setattr(guarantee, "_PREFETCH_DOCS", 16)


def _no_direct(monkeypatch):
    monkeypatch.setattr(_spill, "_set_direct", lambda fd, on: False)


# ----------------------------------------------------------------------------- the files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.integers(0, 3000), min_size=1, max_size=6), width=st.sampled_from([1, 7, 100, 128]),
       block=st.integers(1, 5000), direct=st.booleans(), data=st.data())
def test_spilled_rows_read_back_as_written(tmp_path, monkeypatch, parts, width, block, direct, data):
    """Appended arrays of any sizes come back whole: mapped, in blocks, gathered, in byte slices,
    and read into memory, whether the file is written past the page cache or not."""
    with monkeypatch.context() as m:
        if not direct:
            _no_direct(m)
        m.setattr(_spill, "_STAGE", 4096 * 3)  # a stage smaller than most parts
        rng = np.random.default_rng(len(parts) * 1000 + width)
        sp = Spill(tmp_path)
        f = sp.new_file()
        arrays = [rng.integers(0, 2**32, size=(k, width), dtype=np.uint32) for k in parts]
        for a in arrays:
            sp.append(f, a)
        whole = np.concatenate(arrays)
        mapped = sp.mapped(f, np.uint32, whole.shape)
        np.testing.assert_array_equal(mapped, whole)
        if whole.size:
            assert _spill.known_crc(mapped) == zlib.crc32(whole.tobytes())
            assert _spill.known_crc(mapped[1:]) is None  # not the whole file: read to be checksummed
        got = [(lo, b.copy()) for lo, b in row_blocks(mapped, block)]
        assert [lo for lo, _ in got] == sorted(lo for lo, _ in got)
        np.testing.assert_array_equal(np.concatenate([b for _, b in got]) if got else whole[:0], whole)
        rows = np.array(sorted(data.draw(st.sets(st.integers(0, max(0, whole.shape[0] - 1)), max_size=50))),
                        dtype=np.int64) if whole.shape[0] else np.zeros(0, np.int64)
        np.testing.assert_array_equal(gather_rows(mapped, rows), whole[rows])
        assert b"".join(bytes(x) for x in mapped_slices(mapped, 4096 * 5)) == whole.tobytes()
        g = sp.new_file()
        for a in arrays:
            sp.append(g, a.reshape(-1))
        np.testing.assert_array_equal(sp.read(g, np.uint32), whole.reshape(-1))


def test_a_spilled_build_shows_its_linking_progress(tmp_path, corpus, capsys):
    diversify.build(iter(corpus.texts), ids=corpus.ids, spill_dir=tmp_path, progress=True)
    err = capsys.readouterr().err
    assert "sketching" in err and "linking:" in err and "/16 " in err and "band" in err


def test_dropping_pages_of_ordinary_memory_does_nothing(tmp_path):
    assert drop_pages(np.arange(10)) is False
    sp = Spill(tmp_path)
    f = sp.new_file()
    sp.append(f, np.arange(4096, dtype=np.uint32))
    m = sp.mapped(f, np.uint32, (4096,))
    assert drop_pages(m[10:]) is True
    assert int(m[4095]) == 4095  # read again from the file


# ----------------------------------------------------------------------------- builds


def _saved(res, path) -> bytes:
    res.save(path)
    return path.read_bytes()


@pytest.mark.parametrize("config", [
    {},
    {"minhash": {"verify": "estimate"}},
    {"exact": False},
    {"clustering": "components"},
    {"text_simhash": {"max_hamming": 3}},
    {"source_thresholds": {"b": 0.9}},
    {"representative": "key"},
], ids=["default", "estimate", "no-exact", "components", "text-simhash", "source-thresholds", "key"])
@pytest.mark.parametrize("texts_as", ["generator", "list"])
def test_a_spilled_build_writes_the_bytes_of_a_build_in_memory(tmp_path, corpus, small_blocks, config, texts_as):
    """Same clusters, counts and bytes, whatever the stages (the spilled scan reads only the
    buckets of two or more keys, and only the signatures of the documents they hold)."""
    n = len(corpus.texts)
    extra: dict = {}
    if "source_thresholds" in config:
        extra["sources"] = ["a" if i % 3 else "b" for i in range(n)]
    if config.get("representative") == "key":
        extra["keys"] = np.arange(n, dtype=np.float64)[::-1].copy()

    def texts():
        return iter(corpus.texts) if texts_as == "generator" else list(corpus.texts)

    (tmp_path / "spill").mkdir()
    kw = dict(ids=corpus.ids, config=config, chunk_size=500, created_at=CREATED, **extra)
    held = diversify.build(texts(), **kw)
    spilled = diversify.build(texts(), spill_dir=tmp_path / "spill", **kw)
    assert spilled.stats["exact_checks"] == held.stats["exact_checks"]
    assert _saved(spilled, tmp_path / "s.dvf") == _saved(held, tmp_path / "h.dvf")
    assert spilled.report == held.report
    assert os.listdir(tmp_path / "spill") == [], "the temporary files are unnamed"


def test_a_spilled_build_holds_a_bounded_group_of_signatures_at_a_time(tmp_path, corpus, small_blocks,
                                                                       monkeypatch):
    """The linking and the cut into clusters hold at most the bound's rows (small_blocks: 40) in each
    group, more only in a group of one bucket or of one component; dozens of groups give the bytes
    of one (the default bound)."""
    from diversify._kernels import clique as fold
    from diversify.linking import link
    from diversify.linking.keys import Part

    events: list[tuple[str, int]] = []  # ("hold", documents), then what the group scans or folds
    hold, scanned, folded = _spill.HeldRows.hold, link.scan_buckets, fold.clique_groups

    def watched_hold(self, docs, keep=None):
        events.append(("hold", int(docs.size)))
        return hold(self, docs, keep)

    def watched_scan(parts, verifier, forest, **kw):
        def tap(parts):
            for p in parts:
                if isinstance(p, Part):  # its buckets: runs of equal keys
                    keys = p.buckets.keys
                    events.append(("buckets", int(keys.size and 1 + np.count_nonzero(keys[1:] != keys[:-1]))))
                yield p
        return scanned(tap(parts) if not isinstance(parts, tuple) else parts, verifier, forest, **kw)

    def watched_fold(members, bounds, *args):
        events.append(("components", int(bounds.size - 1)))
        return folded(members, bounds, *args)

    read_from: list[int] = []  # the rows of the array each group's pass read
    gather = _spill.gather_rows

    def watched_gather(arr, rows, out=None, **kw):
        read_from.append(int(arr.shape[0]))
        return gather(arr, rows, out, **kw)

    monkeypatch.setattr(_spill, "gather_rows", watched_gather)
    monkeypatch.setattr(_spill.HeldRows, "hold", watched_hold)
    monkeypatch.setattr(link, "scan_buckets", watched_scan)
    monkeypatch.setattr(fold, "clique_groups", watched_fold)
    small = diversify.build(iter(corpus.texts), ids=corpus.ids, spill_dir=tmp_path, chunk_size=500,
                            created_at=CREATED)
    groups = []  # (documents held, what the group did: "buckets"/"components", how many)
    for kind, k in events:
        if kind == "hold":
            groups.append([k, "", 0])
        elif groups:
            groups[-1][1] = kind
            groups[-1][2] += k
    assert sum(g[1] == "buckets" for g in groups) >= 20 and sum(g[1] == "components" for g in groups) >= 10
    for held, kind, units in groups:
        assert held <= 40 or units == 1, (held, kind, units)
    # the first pass reads every signature and keeps those a group may compare: the rest read those
    n = len(corpus.texts)
    assert read_from[0] == n and len(read_from) == len(groups)
    assert all(k < n // 2 for k in read_from[1:]), read_from
    monkeypatch.setattr(_spill, "HELD_BYTES", 64 << 20)
    events.clear()
    whole = diversify.build(iter(corpus.texts), ids=corpus.ids, spill_dir=tmp_path, chunk_size=500,
                            created_at=CREATED)
    assert [k for k, _ in events].count("hold") == 2  # the linking's one group, the cut's
    assert _saved(small, tmp_path / "a.dvf") == _saved(whole, tmp_path / "b.dvf")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_spilled_build_keeps_only_its_signatures_file_open(tmp_path, corpus, small_blocks):
    """The band keys' files and the rows the linking kept for later groups are gone when the build
    returns; the signatures' file stays open while the result maps it, and goes with it."""
    import gc

    def spill_files() -> int:  # distinct files (a mapping holds a second descriptor of its file)
        found = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(str(tmp_path)):
                found.add(target)
        return len(found)

    res = diversify.build(iter(corpus.texts), ids=corpus.ids, spill_dir=tmp_path, chunk_size=500)
    gc.collect()
    assert spill_files() == 1
    del res
    gc.collect()
    assert spill_files() == 0


def test_a_spilled_build_is_read_and_extended_like_any_other(tmp_path, corpus):
    res = diversify.build(iter(corpus.texts[:1200]), ids=corpus.ids[:1200], spill_dir=tmp_path, created_at=CREATED)
    res.save(tmp_path / "a.dvf")
    again = diversify.build(iter(corpus.texts[:1200]), ids=corpus.ids[:1200], created_at=CREATED)
    grown = diversify.add(tmp_path / "a.dvf", corpus.texts[1200:], ids=corpus.ids[1200:], created_at=CREATED)
    grown_held = diversify.add(again.cluster_map, corpus.texts[1200:], ids=corpus.ids[1200:], created_at=CREATED)
    np.testing.assert_array_equal(grown.cluster_ids, grown_held.cluster_ids)
    np.testing.assert_array_equal(np.asarray(res.cluster_map.extras["minhash"]),
                                  np.asarray(again.cluster_map.extras["minhash"]))
    assert sorted(p for p in os.listdir(tmp_path)) == ["a.dvf"]


def test_spill_dir_errors_name_the_parameter(tmp_path):
    with pytest.raises(ConfigError, match=r"`spill_dir` must be an existing directory.*nope"):
        diversify.build(["a b c d e"], spill_dir=tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"`spill_dir` keeps the signatures of texts"):
        diversify.build(vectors=np.eye(3, dtype=np.float32), spill_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"`spill_dir` applies to engine='local'"):
        diversify.build(["a b c d e"], spill_dir=tmp_path, engine="dask")


def test_a_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path, corpus, monkeypatch):
    real = _spill.SpillFile.append

    def full(self, data):
        if self.size > 100_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    monkeypatch.setattr(_spill.SpillFile, "append", full)
    with pytest.raises(DiversifyError, match=r"temporary files in .* could not be written \(No space left on device\)"
                                             r".*another disk \(`spill_dir`\)"):
        diversify.build(iter(corpus.texts), ids=corpus.ids, spill_dir=tmp_path, chunk_size=200)
    assert os.listdir(tmp_path) == []


def test_a_refused_direct_write_of_a_spilled_array_writes_every_byte(tmp_path, corpus, monkeypatch):
    """The artifact writer asks for its pieces again when the file system refuses ``O_DIRECT``
    after taking the flag: a spilled array comes in blocks read from its file, not a list."""
    from diversify import files

    res = diversify.build(iter(corpus.texts), ids=corpus.ids, spill_dir=tmp_path, created_at=CREATED)
    want = _saved(diversify.build(iter(corpus.texts), ids=corpus.ids, created_at=CREATED), tmp_path / "held.dvf")
    real = os.write
    refused = []

    def refuse_direct(fd, data):
        import fcntl

        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT and not refused:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data)

    monkeypatch.setattr(files, "DIRECT_MIN_BYTES", 0)
    monkeypatch.setattr(os, "write", refuse_direct)
    res.save(tmp_path / "spilled.dvf")
    monkeypatch.undo()
    assert refused, "the direct write was tried"
    assert (tmp_path / "spilled.dvf").read_bytes() == want


# ----------------------------------------------------------------------------- the console script


@pytest.fixture
def jsonl(tmp_path, corpus):
    p = tmp_path / "corpus.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for i, t in zip(corpus.ids, corpus.texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    return p


def test_build_stream_spills_beside_the_output_and_writes_the_library_bytes(tmp_path, jsonl, corpus, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    out = tmp_path / "out"
    out.mkdir()
    assert main(["build", str(jsonl), "-o", str(out / "s.dvf"), "--no-progress", "--stream"]) == 0
    assert os.listdir(out) == ["s.dvf"]
    lib = diversify.build(iter(corpus.texts), ids=corpus.ids)
    lib.save(tmp_path / "lib.dvf")
    assert (out / "s.dvf").read_bytes() == (tmp_path / "lib.dvf").read_bytes()
    (tmp_path / "elsewhere").mkdir()
    assert main(["build", str(jsonl), "-o", str(out / "t.dvf"), "--no-progress", "--stream",
                 "--spill-dir", str(tmp_path / "elsewhere")]) == 0
    assert (out / "t.dvf").read_bytes() == (out / "s.dvf").read_bytes()


@pytest.mark.parametrize("extra, says", [([], "`--spill-dir` applies to `build --stream`"),
                                         (["--stream", "--engine", "dask"], "applies to the local engine"),
                                         (["--stream", "MISSING"], "`--spill-dir` must be an existing directory")],
                         ids=["without-stream", "dask", "missing"])
def test_spill_dir_where_it_does_not_apply_is_refused(tmp_path, jsonl, capsys, extra, says):
    where = str(tmp_path / "missing") if "MISSING" in extra else str(tmp_path)
    extra = [e for e in extra if e != "MISSING"]
    assert main(["build", str(jsonl), "-o", str(tmp_path / "x.dvf"), "--no-progress", "--spill-dir", where,
                 *extra]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (tmp_path / "x.dvf").exists()


def test_build_stream_on_a_full_disk_says_so_in_one_line(tmp_path, jsonl):
    """A file size limit (as a full disk) stops the spill: one line naming the directory and the
    cause, no traceback, no artifact, no temporary file."""
    out = tmp_path / "out"
    out.mkdir()
    code = textwrap.dedent(f"""
        import resource, signal, sys
        from diversify.cli.main import main
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        sys.exit(main(["build", {str(jsonl)!r}, "-o", {str(out / "s.dvf")!r}, "--no-progress", "--stream",
                       "--chunk-size", "200"]))
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in r.stderr
    assert any("temporary files in" in ln and "could not be written" in ln for ln in lines), r.stderr
    assert os.listdir(out) == []
